import csv,sys,collections,re
rows=list(csv.reader(open(sys.argv[1])))
hdr=None;tot=collections.defaultdict(lambda:[0,0.0])
for r in rows:
    if 'Kernel Name' in r: hdr=r; continue
    if not hdr or len(r)!=len(hdr): continue
    d=dict(zip(hdr,r))
    if d.get('Metric Name')!='gpu__time_duration.sum': continue
    n=d['Kernel Name']; n=re.sub(r'\(vega::gpu::.*|\(float.*|\(const.*','',n)[:90]
    v=float(d['Metric Value'].replace(',',''))
    unit=d.get('Metric Unit','')
    if unit=='nsecond' or unit=='ns': v/=1000
    elif unit=='msecond': v*=1000
    tot[n][0]+=1; tot[n][1]+=v
s=0
for n,(c,t) in sorted(tot.items(),key=lambda x:-x[1][1]):
    print(f"{c:5d} x {t/c:8.2f} us = {t:9.1f} us  {n}"); s+=t
print("sum us", round(s,1))
