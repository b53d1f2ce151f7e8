package static

import (
	"embed"
	"io/fs"
)

//go:embed demo
var demoFiles embed.FS // read-only: embed.FS cannot be modified

// DemoFS returns the built-in demo site: a few pages, a style sheet, an
// image and large.txt, a file over DefaultMaxCachedFileSize so that
// streaming under the gate can be shown.
func DemoFS() fs.FS {
	sub, err := fs.Sub(demoFiles, "demo")
	if err != nil {
		panic("static: embedded demo site missing: " + err.Error()) // cannot happen: fixed at build time
	}
	return sub
}
