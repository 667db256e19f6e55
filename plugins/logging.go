package plugins

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// hclogFor returns an hclog.Logger (what go-plugin logs through, including
// every line a plugin writes with its own hclog logger) whose entries go to
// the node's slog logger, tagged with the stage and plugin names. While
// quiet is set, go-plugin's warning that the process failed to exit
// gracefully is dropped (for processes killed on purpose).
func hclogFor(log *slog.Logger, stage, plugin string) (l hclog.Logger, quiet *atomic.Bool) {
	if log == nil {
		log = slog.Default()
	}
	quiet = new(atomic.Bool)
	il := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: plugin, Level: hclog.Debug, Output: io.Discard})
	il.RegisterSink(slogSink{log: log.With("stage", stage, "plugin", plugin), quiet: quiet})
	return il, quiet
}

// msgNotGraceful is go-plugin's warning when Kill had to force the process.
const msgNotGraceful = "plugin failed to exit gracefully"

// msgScanStdout is go-plugin's error when the first stdout line is too long
// for it; the start-up error says what the plugin wrote instead.
const msgScanStdout = "error encountered while scanning stdout"

// slogSink forwards hclog entries to slog.
type slogSink struct {
	log   *slog.Logger
	quiet *atomic.Bool
}

func (s slogSink) Accept(name string, level hclog.Level, msg string, args ...any) {
	var l slog.Level
	switch {
	case level <= hclog.Debug:
		l = slog.LevelDebug
	case level == hclog.Info:
		l = slog.LevelInfo
	case level == hclog.Warn:
		l = slog.LevelWarn
	default:
		l = slog.LevelError
	}
	ctx := context.Background()
	if !s.log.Enabled(ctx, l) || msg == msgNotGraceful && s.quiet.Load() || msg == msgScanStdout {
		return
	}
	// go-plugin's own messages carry the binary's path as "plugin"; the
	// node's log uses "plugin" for the plugin's name.
	for i := 0; i+1 < len(args); i += 2 {
		if args[i] == "plugin" {
			args[i] = "plugin_path"
		}
	}
	s.log.Log(ctx, l, msg, append([]any{"logger", name}, args...)...)
}
