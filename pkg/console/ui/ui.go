// Package ui holds the console's pages: plain HTML, CSS and JavaScript,
// embedded in the binary.
package ui

import "embed"

// Files are the pages, served at the console's root.
//
//go:embed index.html app.js style.css
var Files embed.FS
