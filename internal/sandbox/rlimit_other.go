//go:build !unix

package sandbox

func hardNoFile() uint64 { return 0 }
