package main

// unnoticedGuards are the guards of issue 26: six guards no test noticed.
func unnoticedGuards() []mutant {
	return []mutant{}
}
