package egress

import "testing"

func TestPackageOf(t *testing.T) {
	tests := []struct {
		host, path, name, version string
	}{
		{"registry.npmjs.org", "/left-pad", "left-pad", ""},
		{"registry.npmjs.org", "/left-pad/1.3.0", "left-pad", "1.3.0"},
		{"registry.npmjs.org", "/left-pad/-/left-pad-1.3.0.tgz", "left-pad", "1.3.0"},
		{"registry.npmjs.org", "/@types/node", "@types/node", ""},
		{"registry.npmjs.org", "/@types%2fnode", "@types/node", ""},
		{"registry.npmjs.org", "/@types/node/-/node-20.1.0.tgz", "@types/node", "20.1.0"},
		{"registry.npmjs.org", "/-/v1/search", "", ""},
		{"registry.npmjs.org", "/", "", ""},
		{"pypi.org", "/simple/requests/", "requests", ""},
		{"pypi.org", "/pypi/requests/json", "requests", ""},
		{"pypi.org", "/pypi/requests/2.31.0/json", "requests", "2.31.0"},
		{"pypi.org", "/project/requests/", "", ""},
		{"files.pythonhosted.org", "/packages/70/8e/0e2d/requests-2.31.0-py3-none-any.whl", "requests", "2.31.0"},
		{"files.pythonhosted.org", "/packages/9d/be/10/requests-2.31.0.tar.gz", "requests", "2.31.0"},
		{"files.pythonhosted.org", "/packages/aa/zope-interface-6.0.zip", "zope-interface", "6.0"},
		{"files.pythonhosted.org", "/packages/aa/weird.tar.gz", "", ""},
		{"proxy.golang.org", "/github.com/!burnt!sushi/toml/@v/v1.3.2.zip", "github.com/BurntSushi/toml", "v1.3.2"},
		{"proxy.golang.org", "/golang.org/x/net/@v/v0.20.0.mod", "golang.org/x/net", "v0.20.0"},
		{"proxy.golang.org", "/golang.org/x/net/@v/list", "golang.org/x/net", ""},
		{"proxy.golang.org", "/golang.org/x/net/@latest", "golang.org/x/net", ""},
		{"proxy.golang.org", "/golang.org/x/net/@v/", "", ""},
		{"crates.io", "/api/v1/crates/serde/1.0.190/download", "serde", "1.0.190"},
		{"static.crates.io", "/crates/serde/serde-1.0.190.crate", "serde", "1.0.190"},
		{"static.crates.io", "/crates/serde/other-1.0.crate", "", ""},
		{"example.com", "/left-pad/-/left-pad-1.3.0.tgz", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.host+tt.path, func(t *testing.T) {
			name, version := packageOf(tt.host, tt.path)
			if name != tt.name || version != tt.version {
				t.Errorf("packageOf(%s, %s) = %q, %q; want %q, %q", tt.host, tt.path, name, version, tt.name, tt.version)
			}
		})
	}
}
