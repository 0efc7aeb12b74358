package three

// B uses A below it.
func B() int { return A() + 1 }

// b2 is used by c.go.
func b2() int { return 2 }
