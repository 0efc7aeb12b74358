package three

// A is the ground: it uses nothing.
func A() int { return 1 }
