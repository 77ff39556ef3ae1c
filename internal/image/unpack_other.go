//go:build !linux

package image

import (
	"context"
	"errors"
)

func (p *puller) unpack(context.Context, []descriptor, string) ([]string, error) {
	return nil, errors.New("unpacking images needs Linux (openat2)")
}
