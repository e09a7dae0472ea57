package sim

// kvCache is the engine's paged KV cache: a pool of blocks of blockSize
// tokens that sequences take as they grow and give back when they finish or
// are preempted. With prefix caching a full block keeps the chained hash of
// its tokens after it is freed, and a later sequence with the same prefix
// takes it back instead of computing it. Free blocks form one queue, least
// recently freed first, so the first to be reused (evicting its hash) is the
// one that has been unused longest, as in vLLM's free block queue. Only the
// scheduler goroutine uses it.
type kvCache struct {
	blockSize  int
	caching    bool
	blocks     []kvBlock
	head, tail int32 // free queue; -1 when empty
	numFree    int
	cached     map[uint64]int32
}

type kvBlock struct {
	ref        int32
	prev, next int32 // free-queue links
	inFree     bool
	hashed     bool
	hash       uint64
}

const noBlock = -1

func newKVCache(numBlocks, blockSize int, caching bool) *kvCache {
	c := &kvCache{
		blockSize: blockSize,
		caching:   caching,
		blocks:    make([]kvBlock, numBlocks),
		head:      noBlock,
		tail:      noBlock,
	}
	if caching {
		c.cached = make(map[uint64]int32)
	}
	for i := range c.blocks {
		c.pushFree(int32(i))
	}
	return c
}

// blocksFor is the number of blocks that hold n tokens.
func (c *kvCache) blocksFor(n int) int { return (n + c.blockSize - 1) / c.blockSize }

// usage is the share of blocks held by sequences; cached free blocks count
// as free, as vLLM's kv_cache_usage_perc counts them.
func (c *kvCache) usage() float64 { return 1 - float64(c.numFree)/float64(len(c.blocks)) }

// lookup returns how many leading hashes name cached blocks and how many of
// those are in the free queue (taking them makes them unavailable to
// allocate).
func (c *kvCache) lookup(hashes []uint64) (hits, hitsFree int) {
	if !c.caching {
		return 0, 0
	}
	for _, h := range hashes {
		id, ok := c.cached[h]
		if !ok {
			break
		}
		hits++
		if c.blocks[id].inFree {
			hitsFree++
		}
	}
	return hits, hitsFree
}

// take appends the first n cached blocks of hashes to dst and holds them;
// lookup must have found at least n.
func (c *kvCache) take(dst []int32, hashes []uint64) []int32 {
	for _, h := range hashes {
		id := c.cached[h]
		b := &c.blocks[id]
		if b.inFree {
			c.removeFree(id)
		}
		b.ref++
		dst = append(dst, id)
	}
	return dst
}

// allocate appends n fresh blocks to dst, evicting the hashes of the least
// recently freed cached blocks; it reports false, taking nothing, when fewer
// than n are free.
func (c *kvCache) allocate(dst []int32, n int) ([]int32, bool) {
	if n > c.numFree {
		return dst, false
	}
	for range n {
		id := c.head
		c.removeFree(id)
		b := &c.blocks[id]
		if b.hashed {
			if c.cached[b.hash] == id {
				delete(c.cached, b.hash)
			}
			b.hashed = false
		}
		b.ref = 1
		dst = append(dst, id)
	}
	return dst, true
}

// release gives blocks back, last first, so a sequence's tail blocks (the
// least likely to be shared) are evicted before its head.
func (c *kvCache) release(ids []int32) {
	for i := len(ids) - 1; i >= 0; i-- {
		b := &c.blocks[ids[i]]
		b.ref--
		if b.ref == 0 {
			c.pushFree(ids[i])
		}
	}
}

// commit records that block id, now full and computed, holds the tokens
// whose chained hash is h. A second block with the same content stays
// uncached, as in vLLM.
func (c *kvCache) commit(id int32, h uint64) {
	if !c.caching {
		return
	}
	b := &c.blocks[id]
	if b.hashed {
		return
	}
	if _, dup := c.cached[h]; dup {
		return
	}
	b.hash, b.hashed = h, true
	c.cached[h] = id
}

func (c *kvCache) pushFree(id int32) {
	b := &c.blocks[id]
	b.prev, b.next, b.inFree = c.tail, noBlock, true
	if c.tail != noBlock {
		c.blocks[c.tail].next = id
	} else {
		c.head = id
	}
	c.tail = id
	c.numFree++
}

func (c *kvCache) removeFree(id int32) {
	b := &c.blocks[id]
	if b.prev != noBlock {
		c.blocks[b.prev].next = b.next
	} else {
		c.head = b.next
	}
	if b.next != noBlock {
		c.blocks[b.next].prev = b.prev
	} else {
		c.tail = b.prev
	}
	b.prev, b.next, b.inFree = noBlock, noBlock, false
	c.numFree--
}

// Block hashes chain: a block's hash covers its token ids and its parent's
// hash, so equal hashes mean equal prefixes, as vLLM's block hashes do.
const hashStart uint64 = 0xcbf29ce484222325

func hashToken(h uint64, id int32) uint64 {
	h ^= uint64(uint32(id)) + 1
	return h * 0x100000001b3
}

// saltHash is where a sequence's hash chain starts: hashStart without a
// salt, else a start that covers the salt, so vLLM's cache_salt keeps two
// tenants' (or two benchmark runs') equal prompts apart in the cache.
func saltHash(salt string) uint64 {
	if salt == "" {
		return hashStart
	}
	h := hashStart
	for i := 0; i < len(salt); i++ {
		h = hashToken(h, int32(salt[i]))
	}
	return finishHash(h ^ 0x5a17)
}

// finishHash seals a block's running hash (a splitmix64 finaliser), so
// neighbouring token sequences spread over the whole range.
func finishHash(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	return h ^ h>>31
}
