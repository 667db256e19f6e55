package plugins

// PluginPath gives the external test package (plugins_test) the plugin
// binaries built by TestMain.
var PluginPath = pluginPath

// DecideRec runs one record batch through a chain.
var DecideRec = decideRec
