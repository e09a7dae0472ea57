package sim

import (
	"sync"
	"sync/atomic"
)

// pageSize is the stride at which leaked memory is written so that every
// page of it is resident, not just reserved.
const pageSize = 4096

// leak is the planted memory leak of Config.LeakMBPer1kRequests: every
// request the engine answers keeps LeakMBPer1kRequests/1000 MB that
// nothing frees, the way a per-request cache that is never evicted grows a
// real server's RSS. The soak tier must see it in /proc/<pid>/status and
// in process_resident_memory_bytes.
type leak struct {
	perRequest int
	mu         sync.Mutex
	kept       [][]byte
	bytes      atomic.Int64
}

func newLeak(mbPer1k float64) *leak {
	return &leak{perRequest: int(mbPer1k * (1 << 20) / 1000)}
}

// request leaks one request's share.
func (l *leak) request() {
	if l.perRequest <= 0 {
		return
	}
	b := make([]byte, l.perRequest)
	for i := 0; i < len(b); i += pageSize {
		b[i] = 1
	}
	l.mu.Lock()
	l.kept = append(l.kept, b)
	l.mu.Unlock()
	l.bytes.Add(int64(len(b)))
}

// leaked is the bytes kept so far.
func (l *leak) leaked() int64 { return l.bytes.Load() }
