package journal

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 7, 9, 0, 0, 123456000, time.UTC)

func rec(i int) Record {
	return Record{
		ID:      fmt.Sprintf("d-%d", i),
		Event:   "pull_request",
		Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)),
		At:      t0.Add(time.Duration(i) * time.Microsecond),
	}
}

func same(a, b Record) bool {
	return a.ID == b.ID && a.Event == b.Event && bytes.Equal(a.Payload, b.Payload) && a.At.Equal(b.At)
}

// writeSegment starts a writer in dir and appends recs.
func writeSegment(t *testing.T, dir string, recs ...Record) *Writer {
	t.Helper()
	w, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	for _, r := range recs {
		if err := w.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// appendRaw appends bytes to a segment as a crashed or slow writer
// would have left them.
func appendRaw(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func frame(t *testing.T, r Record) []byte {
	t.Helper()
	b, err := appendFrame(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func size(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func readAll(t *testing.T, dir string, from Pos, max int) ([]Record, Pos) {
	t.Helper()
	var out []Record
	for {
		recs, next, err := Read(dir, from, max)
		if err != nil {
			t.Fatalf("read from %+v: %v", from, err)
		}
		if len(recs) > max {
			t.Fatalf("read %d records, max %d", len(recs), max)
		}
		out = append(out, recs...)
		if len(recs) == 0 {
			return out, next
		}
		from = next
	}
}

func checkRecords(t *testing.T, got []Record, want ...Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if !same(got[i], want[i]) {
			t.Fatalf("record %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	big := bytes.Repeat([]byte("x"), 3<<20)
	for _, r := range []Record{
		rec(1),
		{ID: "d-empty", Event: "ping", At: t0},
		{ID: "d-big", Event: "push", Payload: big, At: t0.Add(time.Hour)},
		{ID: "d-ünïcode", Event: "issue_comment", Payload: []byte{0, 1, 2, 0xff}, At: t0.Add(-time.Hour)},
		{ID: "d-zero-time", Event: "ping"},
	} {
		t.Run(r.ID, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			w := writeSegment(t, dir, r)
			got, next, err := Read(dir, Pos{}, 10)
			if err != nil {
				t.Fatal(err)
			}
			checkRecords(t, got, r)
			if want := (Pos{1, size(t, w.Path())}); next != want {
				t.Errorf("next = %+v, want %+v", next, want)
			}
		})
	}
}

func TestAppendRefusesOversized(t *testing.T) {
	t.Parallel()
	w := writeSegment(t, t.TempDir())
	for _, r := range []Record{
		{ID: "d-1", Event: "push", Payload: make([]byte, maxBody)},
		{ID: strings.Repeat("i", 1<<16), Event: "push"},
	} {
		if err := w.Append(r); err == nil {
			t.Errorf("append of %d+%d bytes: no error", len(r.ID), len(r.Payload))
		}
	}
}

// Each writer start is a new segment, numbered one past the newest, and
// reads go through them in number order; max bounds each read and next
// goes on where it stopped.
func TestSegmentsAndContinuation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A segment left by an earlier run numbered 41: the next is 42.
	if err := os.WriteFile(filepath.Join(dir, "acks-0000000000000041.log"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a segment"), 0o600); err != nil {
		t.Fatal(err)
	}
	var want []Record
	var last *Writer
	for s := range 3 {
		var recs []Record
		for i := range 10 {
			recs = append(recs, rec(s*10+i))
		}
		w := writeSegment(t, dir, recs...)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if got, want := filepath.Base(w.Path()), segName(int64(42+s)); got != want {
			t.Fatalf("segment %d is %s, want %s", s, got, want)
		}
		want = append(want, recs...)
		last = w
	}
	end := Pos{44, size(t, last.Path())}
	for _, max := range []int{1, 7, 10, 11, 100} {
		got, next := readAll(t, dir, Pos{}, max)
		checkRecords(t, got, want...)
		if next != end {
			t.Errorf("max %d: next = %+v, want %+v", max, next, end)
		}
	}
	// A read of 12 stops two records into the second segment.
	got, next, err := Read(dir, Pos{}, 12)
	if err != nil || len(got) != 12 || next.Segment != 43 {
		t.Fatalf("read 12 = %d records, %+v, %v", len(got), next, err)
	}
	rest, _ := readAll(t, dir, next, 5)
	checkRecords(t, rest, want[12:]...)
	// Nothing new: the same place, nothing read.
	if recs, again, err := Read(dir, end, 5); err != nil || len(recs) != 0 || again != end {
		t.Errorf("read at the end = %d records, %+v, %v", len(recs), again, err)
	}
}

// A frame still being written at the end of the newest segment ends the
// read without error, and is read once whole.
func TestPartialFrameAtNewestTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w := writeSegment(t, dir, rec(1))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	start := size(t, w.Path())
	f := frame(t, rec(2))
	for _, cut := range []int{0, 3, headerLen, headerLen + 5, len(f) - 1} {
		dir := t.TempDir()
		path := filepath.Join(dir, segName(1))
		if err := os.WriteFile(path, append(frame(t, rec(1)), f[:cut]...), 0o600); err != nil {
			t.Fatal(err)
		}
		got, next, err := ReadSkipping(dir, Pos{}, 10, func(s Skipped) {
			t.Errorf("cut at %d: the newest segment's unfinished frame was reported torn: %+v", cut, s)
		})
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		checkRecords(t, got, rec(1))
		if next != (Pos{1, start}) {
			t.Fatalf("cut at %d: next = %+v, want %+v", cut, next, Pos{1, start})
		}
		// The writer finishes the frame: the next read returns it.
		appendRaw(t, path, f[cut:])
		got, next, err = Read(dir, next, 10)
		if err != nil {
			t.Fatalf("cut at %d, completed: %v", cut, err)
		}
		checkRecords(t, got, rec(2))
		if next != (Pos{1, size(t, path)}) {
			t.Errorf("cut at %d, completed: next = %+v", cut, next)
		}
	}
}

// An older segment's writer is gone: a torn frame at its end is skipped,
// reported, and the read goes on in the next segment.
func TestTornTailInOlderSegment(t *testing.T) {
	t.Parallel()
	f := frame(t, rec(2))
	bad := append([]byte(nil), f...)
	bad[len(bad)-1] ^= 0xff
	for _, tc := range []struct {
		name string
		tail []byte
	}{
		{"short header", f[:5]},
		{"short body", f[:len(f)-3]},
		{"checksum fails at the end", bad},
		{"zeros", make([]byte, 100)},
		{"length too large", []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			old := writeSegment(t, dir, rec(1))
			if err := old.Close(); err != nil {
				t.Fatal(err)
			}
			tornAt := size(t, old.Path())
			appendRaw(t, old.Path(), tc.tail)
			// Until a new writer starts, the segment may still be
			// being written: a torn frame is waited on, not skipped
			// (except garbage no writer could be finishing).
			noSkip := func(s Skipped) { t.Errorf("skipped %+v before the new writer", s) }
			if got, next, err := ReadSkipping(dir, Pos{}, 10, noSkip); tc.name != "zeros" && tc.name != "length too large" {
				if err != nil || len(got) != 1 || next != (Pos{1, tornAt}) {
					t.Fatalf("before the new writer: %d records, %+v, %v", len(got), next, err)
				}
			}
			writeSegment(t, dir, rec(3))
			var skips []Skipped
			got, next, err := ReadSkipping(dir, Pos{}, 10, func(s Skipped) { skips = append(skips, s) })
			if err != nil {
				t.Fatal(err)
			}
			checkRecords(t, got, rec(1), rec(3))
			if want := (Skipped{File: old.Path(), Offset: tornAt, Bytes: int64(len(tc.tail))}); len(skips) != 1 || skips[0] != want {
				t.Errorf("skipped %+v, want %+v", skips, want)
			}
			if next.Segment != 2 {
				t.Errorf("next = %+v, want in segment 2", next)
			}
			// Read from the torn frame's place: skipped again, nothing lost.
			got, _, err = Read(dir, Pos{1, tornAt}, 10)
			if err != nil {
				t.Fatal(err)
			}
			checkRecords(t, got, rec(3))
		})
	}
}

// A damaged frame with data after it is corruption, in the newest segment
// or an older one: an error naming the file and the offset, every time.
func TestCorruptFrame(t *testing.T) {
	t.Parallel()
	for _, older := range []bool{false, true} {
		t.Run(fmt.Sprintf("older=%v", older), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, segName(1))
			good := frame(t, rec(1))
			bad := frame(t, rec(2))
			bad[len(bad)-2] ^= 0x01
			data := append(append(append([]byte(nil), good...), bad...), frame(t, rec(3))...)
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if older {
				writeSegment(t, dir, rec(4))
			}
			for range 2 {
				got, next, err := Read(dir, Pos{}, 10)
				want := fmt.Sprintf("%s: corrupt frame at byte %d", path, len(good))
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("err = %v, want one containing %q", err, want)
				}
				// What came before is returned, and next stops at the damage.
				checkRecords(t, got, rec(1))
				if next != (Pos{1, int64(len(good))}) {
					t.Errorf("next = %+v", next)
				}
			}
		})
	}
}

// A damaged final frame of the newest segment is waited on (its writer
// may be alive); once more data follows it, it is corruption.
func TestChecksumAtNewestTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, segName(1))
	bad := frame(t, rec(1))
	bad[len(bad)-1] ^= 0x01
	if err := os.WriteFile(path, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, next, err := Read(dir, Pos{}, 10); err != nil || len(got) != 0 || next != (Pos{1, 0}) {
		t.Fatalf("read = %d records, %+v, %v; want none, no error", len(got), next, err)
	}
	appendRaw(t, path, frame(t, rec(2)))
	if _, _, err := Read(dir, Pos{}, 10); err == nil {
		t.Fatal("a damaged frame followed by another read without error")
	}
}

func TestReadPositions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeSegment(t, dir, rec(1))
	for _, tc := range []struct {
		name string
		from Pos
		ok   bool
	}{
		{"zero", Pos{}, true},
		{"a segment that is gone", Pos{Segment: 7, Offset: 99}, true},
		{"past the end", Pos{Segment: 1, Offset: 1 << 20}, false},
		{"negative", Pos{Segment: 1, Offset: -1}, false},
	} {
		got, _, err := Read(dir, tc.from, 10)
		if tc.ok && (err != nil || len(got) != 1) {
			t.Errorf("%s: %d records, %v; want the one record", tc.name, len(got), err)
		}
		if !tc.ok && err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	if _, _, err := Read(dir, Pos{}, 0); err == nil {
		t.Error("max 0: no error")
	}
}

func TestEmptyAndMissingDir(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{t.TempDir(), filepath.Join(t.TempDir(), "missing")} {
		from := Pos{3, 10}
		recs, next, err := Read(dir, from, 10)
		if err != nil || len(recs) != 0 || next != from {
			t.Errorf("read %s = %d records, %+v, %v", dir, len(recs), next, err)
		}
		if err := Trim(dir, from); err != nil {
			t.Errorf("trim %s: %v", dir, err)
		}
	}
}

// Trim removes the segments below the position, never the newest, and a
// read from a trimmed segment starts at the oldest left.
func TestTrim(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i := range 4 {
		if err := writeSegment(t, dir, rec(i)).Close(); err != nil {
			t.Fatal(err)
		}
	}
	left := func() []int64 {
		segs, err := segments(dir)
		if err != nil {
			t.Fatal(err)
		}
		return segs
	}
	if err := Trim(dir, Pos{3, 5}); err != nil {
		t.Fatal(err)
	}
	if got := left(); fmt.Sprint(got) != "[3 4]" {
		t.Fatalf("after trim to 3: %v", got)
	}
	got, _ := readAll(t, dir, Pos{1, 30}, 10)
	checkRecords(t, got, rec(2), rec(3))
	if err := Trim(dir, Pos{99, 0}); err != nil {
		t.Fatal(err)
	}
	if got := left(); fmt.Sprint(got) != "[4]" {
		t.Fatalf("after trim past the end: %v; want the newest kept", got)
	}
}

// Appends from many goroutines are whole frames, none lost.
func TestConcurrentAppend(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w := writeSegment(t, dir)
	const goroutines, each = 8, 200
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r := Record{ID: fmt.Sprintf("g%d-%d", g, i), Event: "push", At: t0,
					Payload: bytes.Repeat([]byte{byte(g)}, 100+i*37)}
				if err := w.Append(r); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	got, _ := readAll(t, dir, Pos{}, 64)
	if len(got) != goroutines*each {
		t.Fatalf("read %d records, want %d", len(got), goroutines*each)
	}
	seen := map[string]bool{}
	next := make([]int, goroutines) // each goroutine's records in its order
	for _, r := range got {
		var g, i int
		if _, err := fmt.Sscanf(r.ID, "g%d-%d", &g, &i); err != nil {
			t.Fatal(err)
		}
		if seen[r.ID] || i != next[g] || !bytes.Equal(r.Payload, bytes.Repeat([]byte{byte(g)}, 100+i*37)) {
			t.Fatalf("record %s: duplicate, out of order or damaged", r.ID)
		}
		seen[r.ID] = true
		next[g]++
	}
}

func TestSyncAndClose(t *testing.T) {
	t.Parallel()
	w := writeSegment(t, t.TempDir())
	if err := w.Sync(); err != nil { // nothing appended
		t.Fatal(err)
	}
	if err := w.Append(rec(1)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(rec(2)); err == nil {
		t.Error("append after close: no error")
	}
	if err := w.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

func BenchmarkAppend(b *testing.B) {
	w, err := Create(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	r := Record{ID: "72d2c1a0-b4e1-11ee-8c9a-0242ac120002", Event: "pull_request", Payload: bytes.Repeat([]byte("x"), 20<<10), At: t0}
	b.SetBytes(int64(len(r.Payload)))
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Append(r); err != nil {
			b.Fatal(err)
		}
	}
}

// A writer past its segment's limit moves on to a new segment, so a
// running door's folded segments can be trimmed: every record reads back
// once, in order, and trimming to the reader's place leaves the newest.
func TestWriterRollsAtTheLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.segLimit = int64(len(frame(t, rec(0)))) * 2 // two records a segment
	var want []Record
	for i := range 5 {
		if err := w.Append(rec(i)); err != nil {
			t.Fatal(err)
		}
		want = append(want, rec(i))
	}
	segs, err := segments(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(segs) != "[1 2 3]" {
		t.Fatalf("segments after 5 records at 2 a segment: %v; want [1 2 3]", segs)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	got, next := readAll(t, dir, Pos{}, 10)
	checkRecords(t, got, want...)
	if err := Trim(dir, next); err != nil {
		t.Fatal(err)
	}
	if segs, _ := segments(dir); fmt.Sprint(segs) != "[3]" {
		t.Fatalf("after trimming to %v: %v; want the writer's segment alone", next, segs)
	}
	if err := w.Append(rec(5)); err != nil {
		t.Fatal(err)
	}
	got, _ = readAll(t, dir, next, 10)
	checkRecords(t, got, rec(5))
}
