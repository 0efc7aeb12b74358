package three

// C uses B and b2 below it, and is used by D above it.
func C() int { return B() + b2() }
