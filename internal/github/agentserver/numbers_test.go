package agentserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/github/agentserver"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
)

// fixture is a result as `perfgate bench --sim --save-detailed` wrote it,
// with a fake card's GPU section: every section of the schema that holds
// numbers, vLLM's extra per-request arrays included.
func fixture(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/result-sim.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decodeTree reads JSON keeping numbers as written.
func decodeTree(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// leaf is a number of the tree: its path as the API names it and a setter.
type leaf struct {
	path string
	set  func(any)
}

// leaves lists every number of v, in path order.
func leaves(v any) []leaf {
	var out []leaf
	var walk func(path string, v any, set func(any))
	walk = func(path string, v any, set func(any)) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				p := k
				if path != "" {
					p = path + "." + k
				}
				walk(p, x[k], func(nv any) { x[k] = nv })
			}
		case []any:
			for i := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), x[i], func(nv any) { x[i] = nv })
			}
		case json.Number:
			out = append(out, leaf{path, set})
		}
	}
	walk("", v, nil)
	return out
}

// extremes are the values a number is set to: out of every range, at the
// edges of some, not whole, and ordinary.
var extremes = []string{"1e308", "-1e308", "-1", "0", "0.5", "1", "3", "1000000001", "86400.5", "86400001", "1e15",
	"1000000000000001", "9007199254740993", "5e-324", "123.456", "0.999", "2", "-0.0"}

// outOfEveryRange are the extremes no number of a result may take.
var outOfEveryRange = map[string]bool{"1e308": true, "-1e308": true, "1000000000000001": true, "9007199254740993": true}

// TestResultNumbersProperty: random results of the schema — the fixture
// with one to three of its numbers (or a new key's) set to values in and
// out of every range — are either stored whole (the samples are the
// upload's bytes) or refused with the path of a number that was changed;
// and one set past every range (1e308, beyond 1e15) is never stored.
func TestResultNumbersProperty(t *testing.T) {
	t.Parallel()
	plan := quickPlan(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("PERFGATE_PROPERTY_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (PERFGATE_PROPERTY_SEED=%d repeats this run)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	base := fixture(t)
	if _, err := agentserver.SplitResult(base, plan, "measured"); err != nil {
		t.Fatalf("the fixture itself is refused: %v", err)
	}
	stored, refused := 0, 0
	for i := range 400 {
		tree := decodeTree(t, base)
		ls := leaves(tree)
		set := map[string]string{} // path → the value it holds now
		for range 1 + rng.IntN(3) {
			v := json.Number(extremes[rng.IntN(len(extremes))])
			if rng.IntN(8) == 0 { // a key perfgate does not know
				k := fmt.Sprintf("extra_%d", rng.IntN(100))
				tree.(map[string]any)[k] = v
				set[k] = string(v)
				continue
			}
			l := ls[rng.IntN(len(ls))]
			l.set(v)
			set[l.path] = string(v)
		}
		var changed []string
		for p, v := range set {
			changed = append(changed, p+"="+v)
		}
		sort.Strings(changed)
		raw, err := json.Marshal(tree)
		if err != nil {
			t.Fatal(err)
		}
		up, err := agentserver.SplitResult(raw, plan, "measured")
		// Beyond 1e15 no number of a result is a measurement (a seed
		// aside): those must be refused, wherever they stand.
		mustRefuse := ""
		for _, c := range changed {
			path, v, _ := strings.Cut(c, "=")
			if outOfEveryRange[v] && !strings.HasSuffix(path, "seed") {
				mustRefuse = c
			}
		}
		if err == nil && mustRefuse != "" {
			t.Errorf("case %d: changed %v; %s was stored", i, changed, mustRefuse)
		}
		if err == nil {
			stored++
			if !bytes.Equal(up.Samples, raw) {
				t.Fatalf("case %d %v: stored samples differ from the upload", i, changed)
			}
			continue
		}
		refused++
		named := false
		for _, c := range changed {
			path, _, _ := strings.Cut(c, "=")
			// An array's length or a count may be refused as a whole:
			// "ttfts has 3 entries for 4 completed".
			if strings.Contains(err.Error(), path) || strings.Contains(err.Error(), strings.Split(path, "[")[0]+" ") {
				named = true
			}
		}
		if !named {
			t.Errorf("case %d: changed %v; refused without naming one of them: %v", i, changed, err)
		}
	}
	t.Logf("%d stored whole, %d refused naming a changed number", stored, refused)
	if stored == 0 || refused == 0 {
		t.Errorf("stored %d, refused %d: the generator does not reach both sides", stored, refused)
	}
}

// TestHugeNumberInEveryArray: 1e308 in any per-request array — vLLM's,
// perfgate's, and the nested ones — is refused through the API with the
// element's path, and nothing is stored; the fixture itself is then
// stored whole.
func TestHugeNumberInEveryArray(t *testing.T) {
	st, ts := newServer(t, agentserver.Options{Lease: time.Minute, LongPoll: time.Second})
	plan := quickPlan(t)
	tok, c := claimedJob(t, st, ts, "a", plan, "")
	jp := fmt.Sprintf("/api/v1/jobs/%d/results", c.JobID)
	for i, path := range []string{
		"ttfts[1]", "itls[2][1]", "input_lens[0]", "output_lens[3]",
		"perfgate.e2els_ms[1]", "perfgate.tpots_ms[2]",
		"latencies[0]", "queue_times[3]", "start_times[1]",
		"perfgate.server_metrics.ttft.buckets[4].count", "perfgate.server_metrics.ttft.buckets[4].le",
	} {
		tree := decodeTree(t, fixture(t))
		found := false
		for _, l := range leaves(tree) {
			if l.path == path {
				l.set(json.Number("1e308"))
				found = true
			}
		}
		if !found {
			t.Fatalf("the fixture has no number at %s", path)
		}
		raw, _ := json.Marshal(tree)
		req := agentapi.ResultRequest{LeaseID: c.LeaseID, IdempotencyKey: "k" + strconv.Itoa(i), Kind: "measured", Result: raw}
		var eb agentapi.ErrorBody
		if code := call(t, ts, tok, jp, req, &eb); code != 400 || !strings.Contains(eb.Error, path+" is 1e") {
			t.Errorf("1e308 at %s: %d %q, want 400 naming %s", path, code, eb.Error, path)
		}
	}
	if rs, _ := st.ListResults(context.Background(), c.JobID); len(rs) != 0 {
		t.Fatalf("refused uploads stored %d results", len(rs))
	}
	// The agent sends the result compact (json.RawMessage marshals so).
	var raw bytes.Buffer
	if err := json.Compact(&raw, fixture(t)); err != nil {
		t.Fatal(err)
	}
	req := agentapi.ResultRequest{LeaseID: c.LeaseID, IdempotencyKey: "whole", Kind: "measured", Result: raw.Bytes()}
	if code := call(t, ts, tok, jp, req, nil); code != 201 {
		t.Fatalf("the fixture: %d, want 201", code)
	}
	rs, err := st.ListResults(context.Background(), c.JobID)
	if err != nil || len(rs) != 1 || !bytes.Equal(rs[0].Samples, raw.Bytes()) {
		t.Fatalf("stored %d results (%v); want the upload whole", len(rs), err)
	}
}

// TestClaimWaitBounds: the claim's wait in seconds is a number the API
// accepts too: a huge one waits the long poll at most, one that is not a
// finite number is refused (converting either to a duration was left to
// the platform).
func TestClaimWaitBounds(t *testing.T) {
	_, ts := newServer(t, agentserver.Options{Lease: time.Minute, LongPoll: time.Millisecond})
	a := register(t, ts, "a")
	for _, tc := range []struct {
		wait string
		want int
	}{{"1e308", 204}, {"0.001", 204}, {"NaN", 400}, {"Inf", 400}, {"-1", 400}} {
		if code := call(t, ts, a.Token, "/api/v1/jobs/claim?wait="+tc.wait, struct{}{}, nil); code != tc.want {
			t.Errorf("claim?wait=%s: %d, want %d", tc.wait, code, tc.want)
		}
	}
}
