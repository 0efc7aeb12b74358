package oauthflow

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// RedisLogger returns a go-redis logger that writes to log, at warning level
// with source=go-redis, instead of go-redis's own lines on standard error
// (during an outage its connection pool writes a few a second). go-redis
// keeps one logger for the whole process, so oauthflow never sets it for
// you; install it once in main:
//
//	redis.SetLogger(oauthflow.RedisLogger(logger))
//
// Pass a logger whose level is above warning to quiet go-redis.
func RedisLogger(log *slog.Logger) interface {
	Printf(ctx context.Context, format string, v ...any)
} {
	if log == nil {
		log = slog.Default()
	}
	return redisLog{log: log}
}

type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	l.log.WarnContext(ctx, "oauthflow: go-redis: "+msg, slog.String("source", "go-redis"))
}
