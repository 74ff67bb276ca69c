package sortedtree

// List is the RFC 6962 Merkle tree of keys in the order they are appended,
// not sorted: the log a third party keeps of the keys it publishes (package
// feed's order), whose checkpoint a sorted-tree head is bound to. It holds
// one hash per set bit of its size. The zero List is empty.
type List struct {
	size  uint64
	stack [][32]byte // roots of the perfect subtrees, largest first
}

// Append adds keys as the next leaves.
func (l *List) Append(keys ...[32]byte) {
	for _, k := range keys {
		h := LeafHash(k)
		for n := l.size; n&1 == 1; n >>= 1 {
			h = NodeHash(l.stack[len(l.stack)-1], h)
			l.stack = l.stack[:len(l.stack)-1]
		}
		l.stack = append(l.stack, h)
		l.size++
	}
}

// Size returns the number of keys appended.
func (l *List) Size() uint64 { return l.size }

// Root returns the RFC 6962 root of the keys appended.
func (l *List) Root() [32]byte {
	if l.size == 0 {
		return EmptyRoot()
	}
	r := l.stack[len(l.stack)-1]
	for i := len(l.stack) - 2; i >= 0; i-- {
		r = NodeHash(l.stack[i], r)
	}
	return r
}

// ListRoot returns the RFC 6962 root of keys in the given order.
func ListRoot(keys [][32]byte) [32]byte {
	var l List
	l.Append(keys...)
	return l.Root()
}

// Clone returns a copy of l that appends independently of it.
func (l *List) Clone() *List {
	return &List{size: l.size, stack: append([][32]byte(nil), l.stack...)}
}
