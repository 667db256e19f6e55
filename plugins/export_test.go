package plugins

// PluginPath gives the external test package (plugins_test) the plugin
// binaries built by TestMain.
var PluginPath = pluginPath
