package daemon

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"mcpbox/internal/config"
)

// KubeDoctorFile is KubeDoctor for the config file at path, bounded by a
// minute: `mcpbox doctor --backend kubernetes --config FILE`.
func KubeDoctorFile(path string, w io.Writer) (bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("reading config: %w", err)
	}
	c, err := config.Load(path, data)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return KubeDoctor(ctx, c, filepath.Dir(path), w)
}
