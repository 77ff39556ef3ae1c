//go:build !linux

package image

import "errors"

func (p *puller) unpack([]descriptor, string) ([]string, error) {
	return nil, errors.New("unpacking images needs Linux (openat2)")
}
