//go:build !race

package peertest

// slack multiplies the suite's time bounds (see race.go).
const slack = 1
