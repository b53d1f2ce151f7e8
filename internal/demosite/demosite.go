// Package demosite is the small web site `sluice serve` serves when it is
// given no --root (the README's quick start): a few pages, a style sheet,
// an image and large.txt, a file over static.DefaultMaxCachedFileSize so
// that streaming under the disk gate can be shown. It lives apart from
// package static so that a library user's zero Config serves nothing by
// accident and their binary does not carry these files.
package demosite

import "embed"

//go:embed index.html about.html style.css large.txt img docs
var files embed.FS // read-only: an embed.FS cannot be modified

// FS returns the site, its files at the root ("index.html"). It is an
// embed.FS, whose files have no modification time: static.New gives such
// a tree content-hash ETags.
func FS() embed.FS { return files }
