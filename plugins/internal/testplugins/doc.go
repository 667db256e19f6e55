// Package testplugins holds misbehaving plugins and a host for the
// reliability tests of package plugins; each subdirectory is a binary.
package testplugins
