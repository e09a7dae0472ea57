package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recordsFrom reads per-request token timings as a result file holds them
// (itls in seconds, errors "" for a successful request) into records.
func recordsFrom(t *testing.T, path string) []record {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		ITLs   [][]float64 `json:"itls"`
		Errors []string    `json:"errors"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	recs := make([]record, len(f.ITLs))
	for i, gaps := range f.ITLs {
		recs[i] = record{ok: i >= len(f.Errors) || f.Errors[i] == "", itl: gaps}
	}
	return recs
}

// The delivery classifier on token timings: recorded from Ollama v0.9.6 on
// this 2-core machine at load average 32–34 (from other work; the notes in
// the files give the commands), one of them with the client under nice 19,
// and constructed: steady decoding, exactly half the gaps in bursts (not
// "most"), and bursts of eight.
// Only successful requests' gaps are judged.
func TestDeliveryCheck(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		file             string
		bound            bool
		gaps             int
		shareLo, shareHi float64 // BurstShare within [shareLo, shareHi]
	}{
		{"itls-constructed-steady.json", false, 16 * 31, 0.05, 0.15},
		{"itls-constructed-half.json", false, 8 * 30, 0.5, 0.5},
		{"itls-constructed-bursts.json", true, 8 * 31, 0.90, 0.91},
		{"ollama-0.9.6-itls-load32-c1.json", true, 961, 0.61, 0.62},
		{"ollama-0.9.6-itls-load33-c1-nice19.json", true, 961, 0.72, 0.73},
		{"ollama-0.9.6-itls-load34-c4.json", true, 961, 0.70, 0.71},
	} {
		t.Run(c.file, func(t *testing.T) {
			d := deliveryCheck(recordsFrom(t, filepath.Join("testdata", c.file)))
			if d == nil {
				t.Fatal("no delivery judged")
			}
			if d.DeliveryBound != c.bound || d.Gaps != c.gaps || d.BurstShare < c.shareLo || d.BurstShare > c.shareHi || d.BurstGapMS != 0.1 {
				t.Errorf("got %+v; want bound %v, %d gaps, share in [%g, %g]", d, c.bound, c.gaps, c.shareLo, c.shareHi)
			}
			if d.DeliveryBound != (d.Reason != "") {
				t.Errorf("bound %v with reason %q", d.DeliveryBound, d.Reason)
			}
			if d.DeliveryBound && !strings.Contains(d.Reason, "TPOT and ITL measure delivery, not decoding") {
				t.Errorf("reason %q", d.Reason)
			}
		})
	}
}

// Too few gaps are not judged; no gaps at all (unstreamed, or one token a
// request) give no delivery record.
func TestDeliveryCheckNeedsGaps(t *testing.T) {
	t.Parallel()
	few := []record{{ok: true, itl: make([]float64, minDeliveryGaps-1)}}
	if d := deliveryCheck(few); d == nil || d.DeliveryBound || d.BurstShare != 1 {
		t.Errorf("%d zero gaps: %+v, want judged unbound (too few)", minDeliveryGaps-1, d)
	}
	enough := []record{{ok: true, itl: make([]float64, minDeliveryGaps)}}
	if d := deliveryCheck(enough); d == nil || !d.DeliveryBound {
		t.Errorf("%d zero gaps: %+v, want delivery-bound", minDeliveryGaps, d)
	}
	if d := deliveryCheck([]record{{ok: true}, {ok: false, itl: []float64{0, 0}}}); d != nil {
		t.Errorf("no gaps of a successful request: %+v, want nil", d)
	}
}

// Where the bursts formed, from the engine's own stamps beside the
// client's: measured on Ollama at load 36-42, 33-40% of its own gaps were
// under 0.1 ms while the client saw 65-97%.
func TestBurstSide(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		engine, client float64
		want           string
	}{
		{0.9, 0.95, "the engine sent them in bursts"},
		{0.35, 0.97, "most bursts formed after the engine"},
		{0.4, 0.65, "both in the engine and on the way to the client"},
	} {
		if got := burstSide(c.engine, c.client); !strings.Contains(got, c.want) {
			t.Errorf("engine %.0f%%, client %.0f%%: %q, want %q", 100*c.engine, 100*c.client, got, c.want)
		}
	}
}
