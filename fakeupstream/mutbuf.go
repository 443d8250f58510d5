package fakeupstream

import "github.com/searchfabric/sfemu/fakeupstream/mvcc"

// mutChunk is the number of mutations in each chunk of a txn's buffer
// past its first (57 KiB of entries).
const mutChunk = 1024

// mutBuf is a txn's buffer of mutations, in write order, held in chunks
// of mutChunk so a whole-buffer prewrite can hand it to the store and
// have each chunk freed once its locks exist (mvcc.PrewriteChunks): a
// large transaction never holds its buffer entries and its locks at once
// (MVCC-12). The first chunk grows by append, so a one-row txn holds one
// small slice.
type mutBuf struct {
	chunks [][]mvcc.Mutation
	n      int
}

func (b *mutBuf) len() int { return b.n }

// at is the i-th buffered mutation.
func (b *mutBuf) at(i int) *mvcc.Mutation { return &b.chunks[i/mutChunk][i%mutChunk] }

// push appends m.
func (b *mutBuf) push(m mvcc.Mutation) {
	if b.n%mutChunk == 0 && b.n/mutChunk == len(b.chunks) {
		var ch []mvcc.Mutation
		if b.n > 0 {
			ch = make([]mvcc.Mutation, 0, mutChunk)
		}
		b.chunks = append(b.chunks, ch)
	}
	last := len(b.chunks) - 1
	b.chunks[last] = append(b.chunks[last], m)
	b.n++
}

// truncate drops the mutations from n on.
func (b *mutBuf) truncate(n int) {
	for i := n; i < b.n; i++ {
		*b.at(i) = mvcc.Mutation{}
	}
	keep := (n + mutChunk - 1) / mutChunk
	for i := keep; i < len(b.chunks); i++ {
		b.chunks[i] = nil
	}
	b.chunks = b.chunks[:keep]
	if keep > 0 {
		b.chunks[keep-1] = b.chunks[keep-1][:n-(keep-1)*mutChunk]
	}
	b.n = n
}

// each calls fn for every mutation in write order.
func (b *mutBuf) each(fn func(m *mvcc.Mutation)) {
	for _, ch := range b.chunks {
		for i := range ch {
			fn(&ch[i])
		}
	}
}

// flat is the buffer as one slice (a view of the first chunk when it is
// the only one, else a copy).
func (b *mutBuf) flat() []mvcc.Mutation {
	if len(b.chunks) == 1 {
		return b.chunks[0]
	}
	out := make([]mvcc.Mutation, 0, b.n)
	for _, ch := range b.chunks {
		out = append(out, ch...)
	}
	return out
}
