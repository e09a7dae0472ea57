// Package docs holds perfgate's manual, one page per topic. It has no code:
// its tests check the pages against the code — every relative link and
// every link the code posts resolves, the server-settings table in
// operations.md is the one server.Settings renders, and every direct
// dependency has its line in the README's "Libraries, and why".
package docs

// Rewrite the generated parts of the pages after changing what they
// render (server.Settings):
//go:generate go test . -run TestSettingsTable -update
