// Package journal is the file the webhook's door appends verified
// deliveries to before it answers GitHub, and the server folds into the
// store's inbox. It holds no database: an append is one write(2), so the
// answer waits for nothing but the page cache (and an fsync when asked).
//
// A journal is a directory of segment files, acks-NNNNNNNNNNNNNNNN.log,
// numbered so they sort. Each writer start opens a new segment, so only the
// newest one can be growing; an older one ends where its writer stopped,
// torn tail included when it crashed mid-append. A segment is a run of
// frames:
//
//	4 bytes  body length, big-endian
//	4 bytes  CRC-32C (Castagnoli) of the body
//	body     8-byte unix microseconds, 2-byte ID length, ID,
//	         2-byte event length, event, payload (the rest)
package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Record is one verified webhook delivery as the door wrote it.
type Record struct {
	ID, Event string
	Payload   []byte
	At        time.Time // arrival, microsecond precision kept
}

// Pos is a place in a journal directory: the next unread byte of a segment.
// The zero Pos is the journal's start.
type Pos struct{ Segment, Offset int64 }

const (
	headerLen = 8
	// minBody is a body with an empty ID, event and payload.
	minBody = 8 + 2 + 2
	// maxBody bounds a frame so a garbage length cannot allocate
	// gigabytes: GitHub caps a payload at 25 MB.
	maxBody = 32 << 20

	segPrefix = "acks-"
	segSuffix = ".log"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendFrame appends r's frame to b.
func appendFrame(b []byte, r Record) ([]byte, error) {
	if len(r.ID) > 0xffff || len(r.Event) > 0xffff {
		return b, fmt.Errorf("journal: delivery %.64q: ID or event longer than 65535 bytes", r.ID)
	}
	n := minBody + len(r.ID) + len(r.Event) + len(r.Payload)
	if n > maxBody {
		return b, fmt.Errorf("journal: delivery %q: %d bytes, over the %d-byte frame limit", r.ID, n, maxBody)
	}
	start := len(b)
	b = slices.Grow(b, headerLen+n)
	b = append(b, make([]byte, headerLen)...)
	b = binary.BigEndian.AppendUint64(b, uint64(r.At.UnixMicro()))
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.ID)))
	b = append(b, r.ID...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.Event)))
	b = append(b, r.Event...)
	b = append(b, r.Payload...)
	body := b[start+headerLen:]
	binary.BigEndian.PutUint32(b[start:], uint32(len(body)))
	binary.BigEndian.PutUint32(b[start+4:], crc32.Checksum(body, castagnoli))
	return b, nil
}

var errBadBody = errors.New("malformed body")

// parseBody decodes a body whose CRC matched. The payload is body's tail,
// not a copy.
func parseBody(body []byte) (Record, error) {
	if len(body) < minBody {
		return Record{}, errBadBody
	}
	at := int64(binary.BigEndian.Uint64(body))
	rest := body[8:]
	id, rest, ok := cutField(rest)
	if !ok {
		return Record{}, errBadBody
	}
	event, rest, ok := cutField(rest)
	if !ok {
		return Record{}, errBadBody
	}
	return Record{ID: string(id), Event: string(event), Payload: rest, At: time.UnixMicro(at).UTC()}, nil
}

// cutField splits a 2-byte length and that many bytes off b.
func cutField(b []byte) (field, rest []byte, ok bool) {
	if len(b) < 2 {
		return nil, nil, false
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b) < 2+n {
		return nil, nil, false
	}
	return b[2 : 2+n], b[2+n:], true
}

// segName is segment n's file name.
func segName(n int64) string {
	return fmt.Sprintf("%s%016d%s", segPrefix, n, segSuffix)
}

// segments lists dir's segment numbers, oldest first; a missing dir has
// none. Other files are ignored.
func segments(dir string) ([]int64, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal: list %s: %w", dir, err)
	}
	var out []int64
	for _, e := range entries {
		num, ok1 := strings.CutPrefix(e.Name(), segPrefix)
		num, ok2 := strings.CutSuffix(num, segSuffix)
		if !ok1 || !ok2 || e.IsDir() {
			continue
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n <= 0 {
			continue
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}
