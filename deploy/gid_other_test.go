//go:build !unix

package deploy

import "os"

func fileGID(os.FileInfo) (string, bool) { return "", false }
