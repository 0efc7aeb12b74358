// Package readme holds nothing but its tests, which hold the manual (the
// README and the pages under docs/) to the code: every Go snippet compiles,
// the README's first screen runs the quickstart, the tests as CI runs them
// and a whole service, every page is linked and every link lands, and the
// lists the catalog decides are the catalog's.
package readme
