package capacity

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// loadSweep reads a sweep measured against the sim (internal/runner/sweep's
// TestKVBlocksMoveTheKnee -update writes them).
func loadSweep(t *testing.T, name string) *Sweep {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var s Sweep
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return &s
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update after checking):\n%s", name, got)
	}
}

func TestRenderMeasuredSweeps(t *testing.T) {
	base, head := loadSweep(t, "base.json"), loadSweep(t, "head.json")
	c := Compare([]Knee{base.Knee()}, []Knee{head.Knee()}, DefaultThreshold)
	if c.Verdict != Regression {
		t.Fatalf("the measured sweeps compare as %s (%s), want regression", c.Verdict, c.Why)
	}
	var md, svg bytes.Buffer
	if err := Markdown(&md, base, head); err != nil {
		t.Fatal(err)
	}
	if err := SVG(&svg, base, head); err != nil {
		t.Fatal(err)
	}
	golden(t, "curve.md", md.Bytes())
	golden(t, "curve.svg", svg.Bytes())
	// The knees are marked in both renderings.
	if n := strings.Count(md.String(), "◆"); n != 3 { // two rows and the legend
		t.Errorf("markdown marks %d knees, want 2 and the legend", n-1)
	}
	if n := strings.Count(svg.String(), `class="knee"`); n != 2 {
		t.Errorf("svg marks %d knees, want 2", n)
	}
}

// A sweep of the head alone (the nightly) has its own table and a curve
// with one knee.
func TestRenderHeadOnly(t *testing.T) {
	t.Parallel()
	head := loadSweep(t, "base.json")
	var md, svg bytes.Buffer
	if err := MarkdownHead(&md, head); err != nil {
		t.Fatal(err)
	}
	if err := SVG(&svg, nil, head); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| offered req/s | served req/s |") || strings.Count(md.String(), "◆") != 2 || strings.Contains(md.String(), "base served") {
		t.Errorf("head-only table:\n%s", md.String())
	}
	if n := strings.Count(svg.String(), `class="knee"`); n != 1 || strings.Contains(svg.String(), `<g class="base">`) {
		t.Errorf("head-only curve has %d knees or a base curve", n)
	}
}
