package sim

import (
	"sync/atomic"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/tokenize"
)

// Finish reasons, as vLLM names them in responses and in
// vllm:request_success_total.
const (
	finishLength = "length"
	finishStop   = "stop"
	finishAbort  = "abort"
)

// seq is one request's life in the engine. The handler sets the fields
// above produced before submitting it; the scheduler alone writes the rest
// and publishes them to the handler through produced, whose atomic store
// orders the writes before it.
type seq struct {
	arrival      time.Time
	promptTokens int
	maxTokens    int  // tokens to generate, counting a stop token
	stopped      bool // the last token is a stop: finish_reason "stop"
	stallAt      int  // tokens after which the stream stalls; 0 = never
	maxParam     int  // the max_tokens the request asked for (metrics)

	produced  atomic.Int64
	cancelled atomic.Bool
	notify    chan struct{} // cap 1: "produced moved"

	// Scheduler state.
	gen        int
	stallUntil time.Time
	firstStep  int64
	lastStep   int64
	computed   int     // tokens whose KV is computed
	prefilling bool    // computing prompt (or recomputing after preemption)
	blocks     []int32 // KV blocks held, in token order
	committed  int     // leading blocks offered to the prefix cache
	hashes     []uint64
	hstate     uint64 // running hash of the partial block
	hcount     int    // tokens in the partial block
	blockSize  int    // 0 = no hashing (prefix caching off)
	admitted   bool

	scheduledAt  time.Time // first admission
	firstTokenAt time.Time
	lastTokenAt  time.Time

	// Results, published by the last produced store.
	cachedTokens int // prompt tokens found in the prefix cache at first admission
	preemptions  int
	finishReason string
}

// newSeq makes a request of the given prompt token ids. With blockSize > 0
// it hashes the prompt's blocks for the prefix cache, starting from salt's
// hash: requests with different salts share no cached block.
func newSeq(prompt []int32, maxTokens, stallAt, blockSize int, salt string) *seq {
	s := &seq{
		arrival:      time.Now(),
		promptTokens: len(prompt),
		maxTokens:    maxTokens,
		maxParam:     maxTokens,
		stallAt:      stallAt,
		notify:       make(chan struct{}, 1),
		blockSize:    blockSize,
		hstate:       saltHash(salt),
		finishReason: finishLength,
	}
	if blockSize > 0 {
		s.hashes = make([]uint64, 0, (len(prompt)+maxTokens)/blockSize+1)
		for _, id := range prompt {
			s.addTokenID(id)
		}
	}
	return s
}

// numTokens is the sequence's length: prompt plus generated tokens.
func (s *seq) numTokens() int { return s.promptTokens + s.gen }

// addTokenID extends the chained block hashes by one token.
func (s *seq) addTokenID(id int32) {
	if s.blockSize == 0 {
		return
	}
	s.hstate = hashToken(s.hstate, id)
	s.hcount++
	if s.hcount == s.blockSize {
		h := finishHash(s.hstate)
		s.hashes = append(s.hashes, h)
		s.hstate, s.hcount = h, 0
	}
}

// generated records output token number gen (1-based) in the hashes.
func (s *seq) generated() { s.addTokenID(tokenize.OutputID(s.gen - 1)) }
