package three

// D sits on top; its use of itself counts for nothing.
func D() int { return C() }

var _ = func() int { return D() }
