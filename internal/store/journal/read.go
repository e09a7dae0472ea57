package journal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// Skipped is a torn tail a read passed over: the end of a segment whose
// writer crashed mid-append. Its delivery was never answered, so GitHub
// counts it as failed and it can be redelivered.
type Skipped struct {
	File   string
	Offset int64 // where the torn frame starts
	Bytes  int64 // bytes skipped, to the end of the file
}

// readBudget bounds the payload bytes one read returns (with at least one
// record), so a batch of large deliveries stays a few tens of MiB.
const readBudget = 64 << 20

// Read returns up to max records from from on, oldest first, across
// segments in number order, and next, the place after the last one
// returned: Read(dir, next, max) goes on from there. A from whose segment
// is gone (trimmed) or zero starts at the oldest segment. A missing dir
// holds nothing.
//
// The newest segment may be being written: an incomplete frame at its end
// ends the read without error, with next at that frame, which a later read
// returns once it is whole. An older segment's writer is gone, so an
// incomplete or damaged frame at its end is a torn write: Read skips it
// (ReadSkipping reports it). A damaged frame with more data after it is
// corruption, and an error names the file and offset.
func Read(dir string, from Pos, max int) (recs []Record, next Pos, err error) {
	return ReadSkipping(dir, from, max, nil)
}

// ReadSkipping is Read that calls skipped (when not nil) for each torn
// tail it passes over.
func ReadSkipping(dir string, from Pos, max int, skipped func(Skipped)) (recs []Record, next Pos, err error) {
	if max <= 0 {
		return nil, from, fmt.Errorf("journal: read %s: max must be positive", dir)
	}
	if from.Offset < 0 {
		return nil, from, fmt.Errorf("journal: read %s: negative offset %d", dir, from.Offset)
	}
	segs, err := segments(dir)
	if err != nil || len(segs) == 0 {
		return nil, from, err
	}
	i := slices.Index(segs, from.Segment)
	next = from
	if i < 0 {
		i, next = 0, Pos{Segment: segs[0]}
	}
	r := reader{dir: dir, max: max, skipped: skipped}
	for ; i < len(segs); i++ {
		if next.Segment != segs[i] {
			next = Pos{Segment: segs[i]}
		}
		var full bool
		next, full, err = r.segment(next, i == len(segs)-1)
		if err != nil || full {
			return r.recs, next, err
		}
	}
	return r.recs, next, nil
}

// reader is one read's progress.
type reader struct {
	dir     string
	max     int
	skipped func(Skipped)
	recs    []Record
	bytes   int
}

func (r *reader) full() bool {
	return len(r.recs) >= r.max || (len(r.recs) > 0 && r.bytes >= readBudget)
}

// segment reads frames of one segment from pos on until the read is full
// (full: stop, next is where to go on) or the segment ends. stop at the
// end of the newest segment is reported as full too.
func (r *reader) segment(pos Pos, newest bool) (next Pos, full bool, err error) {
	path := filepath.Join(r.dir, segName(pos.Segment))
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return pos, false, nil // trimmed while we listed: nothing left in it
	}
	if err != nil {
		return pos, false, fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return pos, false, fmt.Errorf("journal: %w", err)
	}
	if pos.Offset > fi.Size() {
		return pos, false, fmt.Errorf("journal: %s: position %d is past the end (%d bytes): the file is not the one the position was taken in", path, pos.Offset, fi.Size())
	}
	if _, err := f.Seek(pos.Offset, io.SeekStart); err != nil {
		return pos, false, fmt.Errorf("journal: %w", err)
	}
	br := bufio.NewReaderSize(f, 64<<10)
	// torn ends the segment at a frame that is incomplete or damaged with
	// nothing after it: on the newest segment the writer may still finish
	// it, so wait there; on an older one skip it.
	torn := func() (Pos, bool, error) {
		if newest {
			return pos, true, nil
		}
		if r.skipped != nil { // an older segment does not grow: its size is its end
			r.skipped(Skipped{File: path, Offset: pos.Offset, Bytes: fi.Size() - pos.Offset})
		}
		return pos, false, nil
	}
	corrupt := func(what string) (Pos, bool, error) {
		return pos, false, fmt.Errorf("journal: %s: corrupt frame at byte %d (%s): the frames after it cannot be trusted; restart the door so it writes a new segment, move this file out of the journal, and redeliver its deliveries from GitHub", path, pos.Offset, what)
	}
	var hdr [headerLen]byte
	for !r.full() {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			switch {
			case err == io.EOF:
				return pos, newest, nil
			case errors.Is(err, io.ErrUnexpectedEOF):
				return torn()
			}
			return pos, false, fmt.Errorf("journal: read %s: %w", path, err)
		}
		n := binary.BigEndian.Uint32(hdr[:4])
		if n < minBody || n > maxBody {
			// An impossible length is a torn header's zeros or garbage
			// in an older segment; in the newest nothing explains it.
			if newest {
				return corrupt(fmt.Sprintf("length %d", n))
			}
			return torn()
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(br, body); err != nil {
			if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
				return torn()
			}
			return pos, false, fmt.Errorf("journal: read %s: %w", path, err)
		}
		if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(hdr[4:]) {
			if _, err := br.Peek(1); err == io.EOF {
				return torn()
			}
			return corrupt("checksum mismatch")
		}
		rec, err := parseBody(body)
		if err != nil {
			return corrupt(err.Error())
		}
		r.recs = append(r.recs, rec)
		r.bytes += int(n)
		pos.Offset += headerLen + int64(n)
	}
	return pos, true, nil
}

// Trim removes the segments numbered below upTo.Segment: a reader at upTo
// needs none of them. The newest segment is never removed (its writer may
// be appending).
func Trim(dir string, upTo Pos) error {
	segs, err := segments(dir)
	if err != nil || len(segs) == 0 {
		return err
	}
	for _, n := range segs[:len(segs)-1] {
		if n >= upTo.Segment {
			break
		}
		if err := os.Remove(filepath.Join(dir, segName(n))); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("journal: trim: %w", err)
		}
	}
	return nil
}
