//go:build !amd64

package schemas

const hasCastagnoli3 = false

func castagnoli3(ca, cb, cc uint32, a, b, c *byte, words int) (uint32, uint32, uint32) {
	panic("unreachable")
}
