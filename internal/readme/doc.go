// Package readme holds nothing but its test, which compiles every Go snippet
// of the README, so that the manual cannot drift from the API it shows.
package readme
