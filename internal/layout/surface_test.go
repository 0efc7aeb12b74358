package layout

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// rootSurface lists the root package's exported names: its exported
// top-level declarations and the exported methods its exported types declare
// (Type.Method). Test files are left out. A method a type has by embedding an
// interface of the package is that interface's, counted with it: MemoryKV
// and RedisKV are KVs, and KV's methods are read once, on KV.
func rootSurface(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, "../..", func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if !d.Name.IsExported() {
						continue
					}
					if d.Recv == nil {
						names = append(names, d.Name.Name)
						continue
					}
					typ := d.Recv.List[0].Type
					if star, ok := typ.(*ast.StarExpr); ok {
						typ = star.X
					}
					if idx, ok := typ.(*ast.IndexExpr); ok {
						typ = idx.X
					}
					if id, ok := typ.(*ast.Ident); ok && id.IsExported() {
						names = append(names, id.Name+"."+d.Name.Name)
					}
				case *ast.GenDecl:
					for _, spec := range d.Specs {
						switch s := spec.(type) {
						case *ast.TypeSpec:
							if s.Name.IsExported() {
								names = append(names, s.Name.Name)
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								if n.IsExported() {
									names = append(names, n.Name)
								}
							}
						}
					}
				}
			}
		}
	}
	sort.Strings(names)
	return names
}

// TestRootSurface: the root package is what a host app calls, implements or
// reads. Its exported names (top-level names plus the methods of exported
// types) stay at most maxSurface; a name exported only for a sibling package
// belongs in an internal package both can import.
func TestRootSurface(t *testing.T) {
	// 161: Module.ReconnectLink is the binding name of connected accounts'
	// reconnect links (issue 37).
	const maxSurface = 161
	names := rootSurface(t)
	if len(names) > maxSurface {
		t.Errorf("the root exports %d names, at most %d:\n%s", len(names), maxSurface, strings.Join(names, "\n"))
	}
	if testing.Verbose() {
		t.Logf("the root exports %d names:\n%s", len(names), strings.Join(names, "\n"))
	}
}

// TestRootNamesDocumented: go doc is the manual, so every exported name of
// the root has a doc comment (a name in a documented const or var group
// counts as documented by the group). Error and Unwrap methods are exempt:
// the error interface says what they do.
func TestRootNamesDocumented(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, "../..", func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, pkg := range pkgs {
		for name, f := range pkg.Files {
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if d.Name.IsExported() && d.Doc == nil && (d.Recv == nil || exportedRecv(d.Recv) && d.Name.Name != "Error" && d.Name.Name != "Unwrap") {
						missing = append(missing, fset.Position(d.Pos()).String()+" "+d.Name.Name)
					}
				case *ast.GenDecl:
					for _, spec := range d.Specs {
						switch s := spec.(type) {
						case *ast.TypeSpec:
							if s.Name.IsExported() && d.Doc == nil && s.Doc == nil {
								missing = append(missing, name+" "+s.Name.Name)
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								if n.IsExported() && d.Doc == nil && s.Doc == nil && s.Comment == nil {
									missing = append(missing, name+" "+n.Name)
								}
							}
						}
					}
				}
			}
		}
	}
	// A comment names the code, not the file it lives in, and states a rule
	// instead of citing a document the repository does not have.
	cites := regexp.MustCompile(`\b[a-z_]+\.go\b|\bSPEC\b|\bDESIGN\b`)
	for _, f := range pkgs["oauthflow"].Files {
		for _, g := range f.Comments {
			if c := cites.FindString(g.Text()); c != "" {
				missing = append(missing, fmt.Sprintf("%s: a comment cites %q", fset.Position(g.Pos()), c))
			}
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("%s: exported without a doc comment", m)
	}
}

func exportedRecv(recv *ast.FieldList) bool {
	typ := recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if idx, ok := typ.(*ast.IndexExpr); ok {
		typ = idx.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.IsExported()
}
