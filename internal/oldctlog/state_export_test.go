package oldctlog

// OpenUnchecked opens dir as Init does, with no state check, so that a test
// can build the log a forger (or the old code, on a lost database) would:
// a second history under the same key.
func OpenUnchecked(dir string) (*Log, error) { return Open(dir, Options{fresh: true}) }
