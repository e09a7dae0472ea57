// Package docs holds perfgate's manual, one page per topic. It has no code:
// its tests check the pages against the code — every relative link
// resolves, and the server-settings table in operations.md is the one
// server.Settings renders.
package docs

// Rewrite the generated parts of the pages after changing what they
// render (server.Settings):
//go:generate go test . -run TestSettingsTable -update
