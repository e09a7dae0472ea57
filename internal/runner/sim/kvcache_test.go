package sim

import (
	"slices"
	"testing"
)

func TestKVCacheAllocateReleaseAndLRUEviction(t *testing.T) {
	c := newKVCache(4, 16, true)
	if c.usage() != 0 || c.numFree != 4 {
		t.Fatalf("fresh cache usage %g free %d", c.usage(), c.numFree)
	}
	a, ok := c.allocate(nil, 2)
	if !ok || !slices.Equal(a, []int32{0, 1}) || c.usage() != 0.5 {
		t.Fatalf("allocate 2: %v %v usage %g", a, ok, c.usage())
	}
	if _, ok := c.allocate(nil, 3); ok {
		t.Fatal("allocated 3 of 2 free blocks")
	}
	if c.numFree != 2 {
		t.Fatalf("a refused allocation took blocks: %d free", c.numFree)
	}
	c.commit(a[0], 100)
	c.commit(a[1], 101)
	b, _ := c.allocate(nil, 2) // blocks 2, 3
	c.commit(b[0], 200)
	c.commit(b[1], 201)

	// Free a first, then b: a's blocks are least recently freed. Within a
	// sequence the tail goes first.
	c.release(a)
	c.release(b)
	if c.usage() != 0 {
		t.Fatalf("usage %g after releasing everything", c.usage())
	}
	if hits, free := c.lookup([]uint64{100, 101, 999}); hits != 2 || free != 2 {
		t.Fatalf("lookup 100,101: hits %d free %d", hits, free)
	}
	// Allocating two evicts a's blocks (1 then 0); b's survive.
	got, _ := c.allocate(nil, 2)
	if !slices.Equal(got, []int32{1, 0}) {
		t.Fatalf("evicted %v, want a's tail then head [1 0]", got)
	}
	if hits, _ := c.lookup([]uint64{100}); hits != 0 {
		t.Error("evicted block still hits")
	}
	if hits, free := c.lookup([]uint64{200, 201}); hits != 2 || free != 2 {
		t.Errorf("b's blocks: hits %d free %d", hits, free)
	}
	// Taking cached free blocks holds them and leaves the queue.
	held := c.take(nil, []uint64{200, 201})
	if !slices.Equal(held, []int32{2, 3}) || c.numFree != 0 || c.usage() != 1 {
		t.Fatalf("take: %v free %d", held, c.numFree)
	}
	// A shared block stays held until both holders release it.
	shared := c.take(nil, []uint64{200})
	c.release(held)
	if c.numFree != 1 {
		t.Fatalf("free %d after one of two holders of block 2 released", c.numFree)
	}
	c.release(shared)
	if c.numFree != 2 {
		t.Fatalf("free %d after both released", c.numFree)
	}
}

func TestKVCacheCommitKeepsTheFirstCopy(t *testing.T) {
	c := newKVCache(3, 4, true)
	x, _ := c.allocate(nil, 1)
	y, _ := c.allocate(nil, 1)
	c.commit(x[0], 7)
	c.commit(y[0], 7) // the same content computed twice
	c.release(y)
	c.release(x)
	if hits, _ := c.lookup([]uint64{7}); hits != 1 {
		t.Fatal("hash 7 not cached")
	}
	// Reusing y (evicting nothing it owns) must not drop x's entry.
	c.allocate(nil, 2)
	if hits, _ := c.lookup([]uint64{7}); hits != 1 {
		t.Error("evicting the uncached duplicate dropped the cached copy")
	}
}

func TestKVCacheWithoutPrefixCaching(t *testing.T) {
	c := newKVCache(2, 16, false)
	a, _ := c.allocate(nil, 1)
	c.commit(a[0], 5)
	c.release(a)
	if hits, _ := c.lookup([]uint64{5}); hits != 0 {
		t.Error("prefix caching off but a block hit")
	}
}

func TestSeqBlockHashesChain(t *testing.T) {
	p := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}
	a := newSeq(p, 4, 0, 4, "")
	b := newSeq(append([]int32{1, 2, 3, 4, 5, 6, 7, 8}, 42), 4, 0, 4, "")
	c := newSeq([]int32{9, 2, 3, 4, 5, 6, 7, 8, 9}, 4, 0, 4, "")
	if len(a.hashes) != 2 || !slices.Equal(a.hashes, b.hashes) {
		t.Fatalf("same first 8 tokens, hashes %x vs %x", a.hashes, b.hashes)
	}
	// A different first block changes every later hash: hashes chain.
	if c.hashes[0] == a.hashes[0] || c.hashes[1] == a.hashes[1] {
		t.Errorf("different first token, hashes %x vs %x", c.hashes, a.hashes)
	}
	// Generated tokens extend the chain.
	for range 3 {
		a.gen++
		a.generated()
	}
	if len(a.hashes) != 3 {
		t.Errorf("%d hashes after 12 tokens of block size 4", len(a.hashes))
	}
	if off := newSeq(p, 4, 0, 0, ""); off.hashes != nil {
		t.Error("block size 0 still hashed")
	}
}
