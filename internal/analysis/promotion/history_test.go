package promotion

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/perfgate/perfgate/internal/vocab/result"
)

// The noise history is the stored baselines measured like the runs (card
// model and load), newest first, without the one compared with, at most
// HistorySessions; one that does not decode is skipped, and a baseline of
// another card is never decoded.
func TestSessions(t *testing.T) {
	load := result.Load{Model: "m", NumPrompts: 100}
	other := result.Load{Model: "m", NumPrompts: 200}
	row := func(v int, gpu string, l result.Load, bad bool, decoded *[]int) Row {
		return Row{Version: v, GPU: gpu, Decode: func() (Stored, error) {
			*decoded = append(*decoded, v)
			if bad {
				return Stored{}, errors.New("unreadable")
			}
			return Stored{Label: SessionLabel(v, "", fmt.Sprintf("v%d", v)), Load: l}, nil
		}}
	}
	for _, tc := range []struct {
		name    string
		rows    func(d *[]int) []Row
		except  int
		want    []string
		decoded []int
	}{
		{"like the runs, newest first", func(d *[]int) []Row {
			return []Row{row(4, "H100", load, false, d), row(3, "A100", load, false, d), row(2, "H100", other, false, d), row(1, "H100", load, false, d)}
		}, 0, []string{"baseline #4 (v4)", "baseline #1 (v1)"}, []int{4, 2, 1}},
		{"not the one compared with", func(d *[]int) []Row {
			return []Row{row(2, "H100", load, false, d), row(1, "H100", load, false, d)}
		}, 2, []string{"baseline #1 (v1)"}, []int{1}},
		{"unreadable skipped", func(d *[]int) []Row {
			return []Row{row(2, "H100", load, true, d), row(1, "H100", load, false, d)}
		}, 0, []string{"baseline #1 (v1)"}, []int{2, 1}},
		{"at most HistorySessions", func(d *[]int) []Row {
			var rows []Row
			for v := 20; v > 0; v-- {
				rows = append(rows, row(v, "H100", load, false, d))
			}
			return rows
		}, 0, nil, []int{20, 19, 18, 17, 16, 15, 14, 13}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var decoded []int
			got := Sessions(tc.rows(&decoded), "H100", load, tc.except)
			labels := make([]string, len(got))
			for i, s := range got {
				labels[i] = s.Label
			}
			if tc.want != nil && !slices.Equal(labels, tc.want) {
				t.Errorf("sessions %q, want %q", labels, tc.want)
			}
			if len(got) > HistorySessions || !slices.Equal(decoded, tc.decoded) {
				t.Errorf("%d sessions, decoded %v; want at most %d, decoded %v", len(got), decoded, HistorySessions, tc.decoded)
			}
		})
	}
}
