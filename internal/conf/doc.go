// Package conf holds what every package's part of the node configuration
// shares: Problems, the list of mistakes a Validate method returns with
// field paths relative to its section, and ByteSize, the YAML byte count.
//
// Each package owns its section of the configuration file (builder.Config
// is the builder section, storage.Options the store section,
// plugins.Trigger the trigger section): its Go type with yaml tags, its
// defaults and its Validate. node/config composes the sections, places
// each section's problems under its path (Problems.In) and reports them
// all at once.
//
// Decode is for a section whose keys depend on a value beside them (an
// input's keys depend on its URI's transport): the node's configuration
// collects those keys as written, and Decode puts them strictly into the
// owner's own options struct, reporting an unknown key or a value of the
// wrong type as a Problem with its line.
package conf
