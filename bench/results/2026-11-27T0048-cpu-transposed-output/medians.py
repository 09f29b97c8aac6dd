# Medians of the 5 runs per binary, shape and y_t: python3 medians.py [DIR]
import json,glob,statistics,sys
d=sys.argv[1] if len(sys.argv)>1 else '.'
res={}
for v in ['before','after']:
  for t in ['plain','transposed']:
    for f in sorted(glob.glob(f'{d}/{v}_{t}_*.json')):
      for s in json.load(open(f))['shapes']:
        res.setdefault((f"{s['rows']}x{s['hidden']}",t,v),[]).append(s['fwd']['median_us'])
print('| shape | y_t | before (us) | after (us) | after/before | runs before | runs after |')
print('|---|---|---|---|---|---|---|')
for shape in ['4096x4096','1024x32768']:
  for t in ['plain','transposed']:
    b=res[(shape,t,'before')];a=res[(shape,t,'after')]
    mb,ma=statistics.median(b),statistics.median(a)
    print(f"| {shape} | {'yes' if t=='transposed' else 'no'} | {mb:.0f} | {ma:.0f} | {ma/mb:.2f}x | {' '.join('%.0f'%x for x in b)} | {' '.join('%.0f'%x for x in a)} |")
