package ctlog

import "context"

// BuildSortedEdited is BuildSorted with the keys changed by edit before the
// tree is built: a misbehaving log that signs and appends the root of a tree
// that is not its certificates.
func (l *Log) BuildSortedEdited(ctx context.Context, edit func([][32]byte) [][32]byte) (*SortedBuild, error) {
	return l.buildSorted(ctx, edit)
}
