package oldctlog

import "context"

// BuildSortedEdited is BuildSorted with the keys changed by edit before the
// tree is built: a misbehaving log that signs and appends the root of a tree
// that is not its certificates.
func (l *Log) BuildSortedEdited(ctx context.Context, edit func([][32]byte) [][32]byte) (*SortedBuild, error) {
	return l.buildSorted(ctx, buildHooks{edit: edit})
}

// BuildSortedUnappended is BuildSorted by a misbehaving log that signs the
// head of a new tree without appending it to the log.
func (l *Log) BuildSortedUnappended(ctx context.Context) (*SortedBuild, error) {
	return l.buildSorted(ctx, buildHooks{noAppend: true})
}
