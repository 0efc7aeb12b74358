package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every wait in a test has a deadline: a test that waits for something that
// never comes fails with a message at once instead of blocking until the
// run's timeout. The check below reads every _test.go file of the module and
// finds the waits that can block forever on the test's path: a channel
// receive outside a select, a select with no timeout, context or default
// case, and a Wait() call (a sync.WaitGroup, a sync.Cond). Code run by go
// statements and WaitGroup.Go is left out: a goroutine stuck there holds up
// nothing unless the test waits for it, and that wait is checked. Receives
// from a context's Done, a timer's C and time.After are deadlines
// themselves. internal/testkit/waitfor has the helpers to wait with a deadline.

// blockingWait is one place a test can block forever.
type blockingWait struct {
	pos  token.Position
	what string
}

func TestEveryWaitHasADeadline(t *testing.T) {
	t.Parallel()
	var found []blockingWait
	files := 0
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "../.." && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		found = append(found, blockingWaits(fset, f)...)
		files++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d test files; the module's are not where the check looks", files)
	}
	for _, w := range found {
		t.Errorf("%s: %s: wait with a deadline (internal/testkit/waitfor, or a select with a timeout or ctx case)", w.pos, w.what)
	}
}

// The check itself: each snippet is a test body, with the waits it must find.
func TestWaitCheckFlagsBlockingWaits(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, body string
		want       []string
	}{
		{"bare receive", `<-ch`, []string{recvWait}},
		{"receive into a variable", `v := <-ch; _ = v`, []string{recvWait}},
		{"receive with ok", `v, ok := <-ch; _, _ = v, ok`, []string{recvWait}},
		{"receive in an argument", `use((<-ch).N)`, []string{recvWait}},
		{"wait group", `wg.Wait()`, []string{waitCall}},
		{"condition", `cond.L.Lock(); cond.Wait()`, []string{waitCall}},
		{"synctest's wait for its bubble", `synctest.Wait()`, nil},
		{"select without a deadline", `select { case <-a: case v := <-b: _ = v }`, []string{selectWait}},
		{"receive in a callback", `register(func() { <-release })`, []string{recvWait}},
		{"receive in a subtest", `t.Run("x", func(t *testing.T) { <-ch })`, []string{recvWait}},
		{"select with a timeout", `select { case <-ch: case <-time.After(time.Second): }`, nil},
		{"select with a timer", `select { case v := <-ch: _ = v; case <-timer.C: }`, nil},
		{"select with a context", `select { case <-ch: case <-ctx.Done(): }`, nil},
		{"select with a default", `select { case <-ch: default: }`, nil},
		{"context wait", `<-ctx.Done()`, nil},
		{"in a goroutine", `go func() { wg.Wait(); <-ch; close(done) }()`, nil},
		{"in WaitGroup.Go", `wg.Go(func() { <-start })`, nil},
		{"send", `ch <- 1`, nil},
		{"helper", `waitfor.Group(t, &wg, "x"); v := waitfor.Recv(t, ch, "y"); _ = v`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			src := "package p\n\nfunc TestX(t *testing.T) {\n" + c.body + "\n}\n"
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "x_test.go", src, 0)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range blockingWaits(fset, f) {
				got = append(got, w.what)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("found %q in %s; want %q", got, c.body, c.want)
			}
		})
	}
}

const (
	recvWait   = "channel receive without a deadline"
	selectWait = "select without a timeout, context or default case"
	waitCall   = "Wait() without a deadline"
)

// blockingWaits finds the waits in f that can block its test forever.
func blockingWaits(fset *token.FileSet, f *ast.File) []blockingWait {
	elsewhere, inSelect := map[*ast.FuncLit]bool{}, map[*ast.UnaryExpr]bool{}
	var found []blockingWait
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			if lit, ok := n.Call.Fun.(*ast.FuncLit); ok {
				elsewhere[lit] = true
			}
		case *ast.CallExpr:
			if isMethodCall(n, "Go") {
				for _, a := range n.Args {
					if lit, ok := a.(*ast.FuncLit); ok {
						elsewhere[lit] = true
					}
				}
			}
		case *ast.SelectStmt:
			if !selectHasDeadline(n, inSelect) {
				found = append(found, blockingWait{fset.Position(n.Pos()), selectWait})
			}
		}
		return true
	})
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return !elsewhere[n]
		case *ast.UnaryExpr:
			if n.Op == token.ARROW && !inSelect[n] && !isDeadline(n.X) {
				found = append(found, blockingWait{fset.Position(n.Pos()), recvWait})
			}
		case *ast.CallExpr:
			if isMethodCall(n, "Wait") && len(n.Args) == 0 {
				if !isSynctestWait(n) {
					found = append(found, blockingWait{fset.Position(n.Pos()), waitCall})
				}
			}
		}
		return true
	})
	slices.SortStableFunc(found, func(a, b blockingWait) int { return a.pos.Offset - b.pos.Offset })
	return found
}

// selectHasDeadline reports whether s has a default case or a case that
// receives from a deadline, and marks its cases' receives as seen in inSelect.
func selectHasDeadline(s *ast.SelectStmt, inSelect map[*ast.UnaryExpr]bool) bool {
	has := false
	for _, c := range s.Body.List {
		cc := c.(*ast.CommClause)
		if cc.Comm == nil {
			has = true
			continue
		}
		if r := receiveOf(cc.Comm); r != nil {
			inSelect[r] = true
			has = has || isDeadline(r.X)
		}
	}
	return has
}

// receiveOf is the receive a select case's statement makes, if any.
func receiveOf(s ast.Stmt) *ast.UnaryExpr {
	var x ast.Expr
	switch s := s.(type) {
	case *ast.ExprStmt:
		x = s.X
	case *ast.AssignStmt:
		x = s.Rhs[0]
	}
	if r, ok := ast.Unparen(x).(*ast.UnaryExpr); ok && r.Op == token.ARROW {
		return r
	}
	return nil
}

// isDeadline reports whether receiving from ch waits for a deadline: a
// context's Done(), time.After, or a timer's C.
func isDeadline(ch ast.Expr) bool {
	switch ch := ast.Unparen(ch).(type) {
	case *ast.CallExpr:
		if isMethodCall(ch, "Done") {
			return true
		}
		sel, ok := ch.Fun.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		pkg, ok := sel.X.(*ast.Ident)
		return ok && pkg.Name == "time" && sel.Sel.Name == "After"
	case *ast.SelectorExpr:
		return ch.Sel.Name == "C"
	}
	return false
}

// isMethodCall reports whether call calls a method (or package function) named name.
// isSynctestWait reports whether call is testing/synctest's Wait, which
// returns once every goroutine of its bubble is blocked: not a wait for
// something to come.
func isSynctestWait(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == "synctest"
}

func isMethodCall(call *ast.CallExpr, name string) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == name
}
