#include "server/api.h"

#include "engine/option_limits.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "server/engine_loop.h"

namespace vega::server {

json error_body(int status, const std::string& message, const std::string& type, const std::string& code) {
    json e;
    e["message"] = message;
    e["type"] = type;
    e["code"] = code.empty() ? json(status) : json(code);
    return json{{"error", e}};
}

namespace {

constexpr size_t kMaxGrammarBytes = 256 * 1024;  // a request's GBNF text

[[noreturn]] void bad(const std::string& msg, const std::string& code = "invalid_value") { throw ApiError(400, msg, "invalid_request_error", code); }

const json* field(const json& body, const char* name) {
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) return nullptr;
    return &*it;
}

// A field's range and its refusal come from the table the CLI uses (engine/option_limits.h).
void check_limit(const json& v, const OptionLimit& limit) {
    const std::string err = option_error(limit, v.get<double>(), OptionSpelling::Field);
    if (!err.empty()) bad(err);
}

double number(const json& body, const OptionLimit& limit, double dflt) {
    const json* v = field(body, limit.field);
    if (!v) return dflt;
    if (!v->is_number()) bad(std::string("'") + limit.field + "' must be a number");
    check_limit(*v, limit);
    return v->get<double>();
}

int integer(const json& body, const OptionLimit& limit, int dflt) {
    const json* v = field(body, limit.field);
    if (!v) return dflt;
    if (!v->is_number_integer()) bad(std::string("'") + limit.field + "' must be an integer");
    check_limit(*v, limit);  // as a double: an unsigned 2^64-1 is refused as itself, not as -1
    return int(v->get<int64_t>());
}

bool boolean(const json& body, const char* name, bool dflt) {
    const json* v = field(body, name);
    if (!v) return dflt;
    if (!v->is_boolean()) bad(std::string("'") + name + "' must be a boolean");
    return v->get<bool>();
}

// Chat message content: a string, or an array of {type: "text", text} parts.
void check_messages(const json& msgs) {
    if (!msgs.is_array()) bad("'messages' must be an array", "invalid_type");
    if (msgs.empty()) bad("'messages' must not be empty");
    for (size_t i = 0; i < msgs.size(); ++i) {
        const json& m = msgs[i];
        const std::string at = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) bad("'" + at + "' must be an object", "invalid_type");
        auto r = m.find("role");
        if (r == m.end() || !r->is_string()) bad("'" + at + ".role' must be a string", "invalid_type");
        auto c = m.find("content");
        if (c == m.end() || c->is_null()) {
            if (*r == "assistant" && m.contains("tool_calls")) continue;
            bad("'" + at + ".content' is missing", "missing_field");
        }
        if (c->is_string()) continue;
        if (!c->is_array()) bad("'" + at + ".content' must be a string or an array of parts", "invalid_type");
        for (const json& part : *c)
            if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
                bad("'" + at + ".content': only text parts are supported", "invalid_type");
    }
}

}  // namespace

CompletionParams parse_completion_request(const json& body, Endpoint ep, ToolFormat tool_format) {
    if (!body.is_object()) bad("the request body must be a JSON object", "invalid_type");
    CompletionParams p;
    p.endpoint = ep;
    if (const json* m = field(body, "model")) {
        if (!m->is_string()) bad("'model' must be a string", "invalid_type");
        p.model = m->get<std::string>();
    }
    if (ep == Endpoint::Chat) {
        const json* msgs = field(body, "messages");
        if (!msgs) bad("'messages' is required", "missing_field");
        check_messages(*msgs);
        p.messages = *msgs;
        // Content parts are joined into one string for the template.
        for (json& m : p.messages)
            if (m.contains("content") && m["content"].is_array()) {
                std::string s;
                for (const json& part : m["content"]) s += part["text"].get<std::string>();
                m["content"] = s;
            }
        if (const json* t = field(body, "tools")) {
            try {
                check_tools(*t);
            } catch (const std::invalid_argument& e) {
                bad(e.what(), "invalid_type");
            }
            if (!t->empty()) p.tools = *t;
        }
        if (const json* tc = field(body, "tool_choice")) {
            const char* const kChoices =
                "'tool_choice' must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}";
            if (tc->is_string()) {
                const std::string& v = tc->get_ref<const std::string&>();
                if (v == "none") p.tool_choice = ToolChoice::None;
                else if (v == "auto") p.tool_choice = ToolChoice::Auto;
                else if (v == "required") p.tool_choice = ToolChoice::Required;
                else bad(kChoices);
            } else if (tc->is_object() && tc->contains("type") && (*tc)["type"] == "function" && tc->contains("function") &&
                       (*tc)["function"].is_object() && (*tc)["function"].contains("name") &&
                       (*tc)["function"]["name"].is_string()) {
                p.tool_choice = ToolChoice::Named;
                p.tool_name = (*tc)["function"]["name"];
            } else {
                bad(kChoices, "invalid_type");
            }
            if (p.tools.is_null() && p.tool_choice != ToolChoice::None && p.tool_choice != ToolChoice::Auto)
                bad("'tool_choice' " + std::string(p.tool_choice == ToolChoice::Named ? "names a function" : "is required") +
                    " but there are no 'tools'");
        }
        p.parallel_tool_calls = boolean(body, "parallel_tool_calls", true);
        if (p.tool_choice == ToolChoice::None) p.tools = nullptr;  // the model does not see them
    } else {
        const json* pr = field(body, "prompt");
        if (!pr) bad("'prompt' is required", "missing_field");
        if (pr->is_string()) p.prompt = pr->get<std::string>();
        else if (pr->is_array() && pr->size() == 1 && (*pr)[0].is_string()) p.prompt = (*pr)[0].get<std::string>();
        else bad("'prompt' must be a string (or an array of one string)", "invalid_type");
    }
    const OptionLimits& lim = option_limits();
    if (integer(body, lim.n_choices, 1) != 1) bad("only n = 1 is supported", "unsupported_value");
    // -1 (as when absent from a chat request): until end of generation or the context is full.
    int mt = integer(body, lim.n_predict, ep == Endpoint::Completion ? 16 : -1);
    mt = integer(body, lim.max_completion_tokens, mt);
    p.max_tokens = mt;
    SamplerParams& s = p.sampling;
    s.temperature = float(number(body, lim.temperature, 1.0));
    s.top_p = float(number(body, lim.top_p, 1.0));
    s.top_k = integer(body, lim.top_k, 0);
    s.min_p = float(number(body, lim.min_p, 0.0));
    s.presence_penalty = float(number(body, lim.presence_penalty, 0.0));
    s.frequency_penalty = float(number(body, lim.frequency_penalty, 0.0));
    s.repeat_penalty = float(number(body, lim.repeat_penalty, 1.0));
    if (const json* seed = field(body, "seed")) {
        if (!seed->is_number_integer()) bad("'seed' must be an integer", "invalid_type");
        s.seed = uint64_t(seed->get<int64_t>());
        if (s.seed == 0) s.seed = 0x5EED;  // 0 means "random" to the sampler; a client's 0 is a fixed seed
    }
    if (const json* st = field(body, "stop")) {
        if (st->is_string()) p.stop.push_back(st->get<std::string>());
        else if (st->is_array()) {
            if (st->size() > 16) bad("'stop' may hold at most 16 strings");
            for (const json& x : *st) {
                if (!x.is_string()) bad("'stop' must be a string or an array of strings", "invalid_type");
                p.stop.push_back(x.get<std::string>());
            }
        } else bad("'stop' must be a string or an array of strings", "invalid_type");
    }
    p.stream = boolean(body, "stream", false);
    p.ignore_eos = boolean(body, "ignore_eos", false);
    if (const json* rf = field(body, "response_format")) {
        // OpenAI's structured output: json_object (any object) or json_schema (its schema,
        // compiled to a grammar; a keyword the compiler cannot honour is a 400 naming it).
        if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string())
            bad("'response_format' must be an object with a string 'type'", "invalid_type");
        const std::string type = (*rf)["type"];
        std::string gbnf;
        if (type == "json_object") {
            gbnf = grammar::json_object_gbnf();
        } else if (type == "json_schema") {
            const json* js = field(*rf, "json_schema");
            if (!js || !js->is_object() || !js->contains("schema"))
                bad("'response_format.json_schema.schema' is required for type json_schema", "missing_field");
            try {
                gbnf = grammar::json_schema_to_gbnf((*js)["schema"]);
            } catch (const grammar::SchemaError& e) {
                bad(std::string("'response_format.json_schema.schema': ") + e.what(), "unsupported_value");
            }
        } else if (type != "text") {
            bad("'response_format.type' must be text, json_object or json_schema", "invalid_value");
        }
        if (!gbnf.empty()) p.grammar = std::make_shared<const grammar::Grammar>(grammar::Grammar::parse(gbnf));
    }
    if (const json* g = field(body, "grammar")) {
        if (p.grammar) bad("'grammar' and a JSON 'response_format' together: use one", "invalid_value");
        if (!g->is_string()) bad("'grammar' must be a string (GBNF)", "invalid_type");
        const std::string& text = g->get_ref<const std::string&>();
        if (text.size() > kMaxGrammarBytes)
            bad("'grammar' is " + std::to_string(text.size()) + " bytes; at most " + std::to_string(kMaxGrammarBytes));
        if (!text.empty()) {
            try {
                p.grammar = std::make_shared<const grammar::Grammar>(grammar::Grammar::parse(text));
            } catch (const grammar::GrammarError& e) {
                bad(std::string("'grammar': ") + e.what());
            }
        }
    }
    if (p.tool_choice == ToolChoice::Required || p.tool_choice == ToolChoice::Named) {
        // The reply must be a valid call: its grammar, arguments by each function's schema.
        if (p.grammar) bad("'tool_choice' " + std::string(p.tool_choice == ToolChoice::Named ? "naming a function" : "required") +
                           " and a grammar or JSON 'response_format' together: use one");
        try {
            p.grammar = std::make_shared<const grammar::Grammar>(
                grammar::Grammar::parse(tool_call_gbnf(tool_format, p.tools, p.tool_name, p.parallel_tool_calls)));
        } catch (const grammar::SchemaError& e) {
            bad(std::string("'tools': ") + e.what(), "unsupported_value");
        } catch (const std::invalid_argument& e) {
            bad(std::string("'tool_choice': ") + e.what());
        } catch (const grammar::GrammarError& e) {
            bad(std::string("'tools': the call grammar does not compile: ") + e.what(), "unsupported_value");
        }
    }
    if (ep == Endpoint::Chat) {
        // logprobs: a boolean; top_logprobs (0..20) needs it.
        const bool on = boolean(body, "logprobs", false);
        if (const json* t = field(body, "top_logprobs")) {
            if (!t->is_number_integer() || t->get<int64_t>() < 0 || t->get<int64_t>() > kMaxTopLogprobs)
                bad("'top_logprobs' must be an integer from 0 to " + std::to_string(kMaxTopLogprobs));
            if (!on) bad("'top_logprobs' needs 'logprobs': true");
            p.logprobs = int(t->get<int64_t>());
        } else if (on) {
            p.logprobs = 0;
        }
    } else if (const json* l = field(body, "logprobs")) {
        // Completions: the number of alternatives (OpenAI allows up to 5; vega 20).
        if (!l->is_number_integer() || l->get<int64_t>() < 0 || l->get<int64_t>() > kMaxTopLogprobs)
            bad("'logprobs' must be an integer from 0 to " + std::to_string(kMaxTopLogprobs));
        p.logprobs = int(l->get<int64_t>());
    }
    if (const json* so = field(body, "stream_options")) {
        if (!so->is_object()) bad("'stream_options' must be an object", "invalid_type");
        p.include_usage = boolean(*so, "include_usage", false);
    }
    return p;
}

namespace {
json base(const CompletionParams& p, const std::string& id, long created, bool chunk) {
    const bool chat = p.endpoint == Endpoint::Chat;
    return json{{"id", id},
                {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
                {"created", created},
                {"model", p.model}};
}
json usage_json(const Usage& u) {
    return json{{"prompt_tokens", u.prompt_tokens},
                {"completion_tokens", u.completion_tokens},
                {"total_tokens", u.prompt_tokens + u.completion_tokens},
                {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}
}  // namespace

json completion_response(const CompletionParams& p, const std::string& id, long created, const std::string& text,
                         const char* finish_reason, const Usage& u) {
    json r = base(p, id, created, false);
    json choice{{"index", 0}};
    if (p.endpoint == Endpoint::Chat) choice["message"] = {{"role", "assistant"}, {"content", text}};
    else choice["text"] = text, choice["logprobs"] = nullptr;
    choice["finish_reason"] = finish_reason;
    r["choices"] = json::array({choice});
    r["usage"] = usage_json(u);
    return r;
}

json stream_chunk(const CompletionParams& p, const std::string& id, long created, const std::string& text,
                  const char* finish_reason, bool first) {
    json r = base(p, id, created, true);
    json choice{{"index", 0}};
    if (p.endpoint == Endpoint::Chat) {
        json delta = json::object();
        if (first) delta["role"] = "assistant";
        if (!finish_reason) delta["content"] = text;
        choice["delta"] = delta;
    } else {
        choice["text"] = text;
        choice["logprobs"] = nullptr;
    }
    choice["finish_reason"] = finish_reason ? json(finish_reason) : json(nullptr);
    r["choices"] = json::array({choice});
    return r;
}

json chat_reply_response(const CompletionParams& p, const std::string& id, long created, const ChatReply& reply,
                         const char* finish_reason, const Usage& u) {
    json r = base(p, id, created, false);
    json msg{{"role", "assistant"}};
    msg["content"] = reply.content.empty() && !reply.calls.empty() ? json(nullptr) : json(reply.content);
    if (!reply.reasoning.empty()) msg["reasoning_content"] = reply.reasoning;
    if (!reply.calls.empty()) {
        json calls = json::array();
        for (size_t i = 0; i < reply.calls.size(); ++i)
            calls.push_back({{"id", reply.call_ids[i]},
                             {"type", "function"},
                             {"function", {{"name", reply.calls[i].name}, {"arguments", reply.calls[i].arguments}}}});
        msg["tool_calls"] = calls;
    }
    json choice{{"index", 0}, {"message", msg}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
    r["choices"] = json::array({choice});
    r["usage"] = usage_json(u);
    return r;
}

json chat_delta_chunk(const CompletionParams& p, const std::string& id, long created, json delta, bool first) {
    json r = base(p, id, created, true);
    if (first) {
        json d{{"role", "assistant"}};
        for (auto& [k, v] : delta.items()) d[k] = v;
        delta = d;
    }
    r["choices"] = json::array({json{{"index", 0}, {"delta", delta}, {"finish_reason", nullptr}}});
    return r;
}

namespace {
json bytes_of(const std::string& s) {
    json b = json::array();
    for (unsigned char c : s) b.push_back(int(c));
    return b;
}
}  // namespace

json logprobs_json(const CompletionParams& p, const std::vector<TokenLp>& lps, size_t text_offset0) {
    if (p.logprobs < 0) return nullptr;
    if (p.endpoint == Endpoint::Chat) {
        json content = json::array();
        for (const TokenLp& t : lps) {
            json top = json::array();
            for (const auto& [tok, v] : t.top) top.push_back({{"token", tok}, {"logprob", v}, {"bytes", bytes_of(tok)}});
            content.push_back({{"token", t.token}, {"logprob", t.logprob}, {"bytes", bytes_of(t.token)}, {"top_logprobs", top}});
        }
        return json{{"content", content}};
    }
    json tokens = json::array(), lp = json::array(), top = json::array(), off = json::array();
    size_t at = text_offset0;
    for (const TokenLp& t : lps) {
        tokens.push_back(t.token);
        lp.push_back(t.logprob);
        json alts = json::object();
        for (const auto& [tok, v] : t.top)
            if (!alts.contains(tok)) alts[tok] = v;  // (two ids with one text: the likelier)
        top.push_back(alts);
        off.push_back(at);
        at += t.token.size();
    }
    return json{{"tokens", tokens}, {"token_logprobs", lp}, {"top_logprobs", top}, {"text_offset", off}};
}

json usage_chunk(const CompletionParams& p, const std::string& id, long created, const Usage& u) {
    json r = base(p, id, created, true);
    r["choices"] = json::array();
    r["usage"] = usage_json(u);
    return r;
}

}  // namespace vega::server
