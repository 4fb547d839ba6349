"""Per benchmark case of results documents: the median, how many calls were blocked, host-bound, judged frugally, and why it stopped."""

import json
import sys

for path in sys.argv[1:]:
    doc = json.load(open(path))
    for e in doc["evaluations"]:
        who = "REF" if e["submission"].get("is_reference") else e["submission"]["file"]
        for c in e["cases"]:
            t = c.get("timing")
            if not t:
                continue
            print(
                f"{who:18} {c['id'][:22]:22} med {t.get('rank_us', 0):9.2f} n {t['n']:5} blocked {t.get('blocked_calls')} off {str(t.get('blocking_off'))[:40]} host {t.get('host_bound_calls')} frugal {t.get('frugal')} stop {t.get('stop_reason')} flags {[f[:40] for f in t.get('flags', [])]}"
            )
