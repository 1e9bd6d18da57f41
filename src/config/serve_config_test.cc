#include "config/serve_config.h"

#include <gtest/gtest.h>

namespace tessera::config {
namespace {

TEST(ServeFile, ReadsEveryKey) {
  auto f = parseServeYaml(R"(apiVersion: tessera.io/v1alpha1
kind: ServerConfig
listen: 0.0.0.0:8443
store: /var/lib/tessera/state.db
tokenFile: /etc/tessera/token
insecureNoAuth: false
cluster: c.yaml
profile: p.yaml
tls: {cert: a.crt, key: a.key}
maxBodyBytes: 1048576
threads: 4
logFormat: json
kubernetes: {apiServer: https://10.0.0.1:6443, tokenFile: t, caFile: ca.crt}
)",
                          "serve.yaml");
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(*f->listen, "0.0.0.0:8443");
  EXPECT_EQ(*f->store, "/var/lib/tessera/state.db");
  EXPECT_EQ(*f->tokenFile, "/etc/tessera/token");
  EXPECT_FALSE(*f->insecureNoAuth);
  EXPECT_EQ(*f->tlsCert, "a.crt");
  EXPECT_EQ(*f->tlsKey, "a.key");
  EXPECT_EQ(*f->maxBodyBytes, 1048576);
  EXPECT_EQ(*f->threads, 4);
  EXPECT_EQ(*f->logFormat, "json");
  EXPECT_EQ(*f->kubeApiServer, "https://10.0.0.1:6443");
  EXPECT_EQ(*f->kubeTokenFile, "t");
  EXPECT_EQ(*f->kubeCaFile, "ca.crt");
  auto empty = parseServeYaml("", "empty.yaml");
  ASSERT_TRUE(empty);
  EXPECT_FALSE(empty->listen);
}

TEST(ServeFile, ErrorsNameFileLineAndField) {
  struct Case {
    const char* text;
    const char* mention;
  };
  for (const Case& c :
       {Case{"listen: a:1\nthreads: 0\n", "serve.yaml:2: threads"},
        Case{"colour: blue\n", "colour"}, Case{"tls:\n  cert: x.crt\n", "needs both cert and key"},
        Case{"logFormat: xml\n", "text or json"}, Case{"kind: Cluster\n", "kind"},
        Case{"insecureNoAuth: yes\n", "insecureNoAuth"},
        Case{"kubernetes: {server: x}\n", "kubernetes.server"}}) {
    auto f = parseServeYaml(c.text, "serve.yaml");
    ASSERT_FALSE(f) << c.text;
    EXPECT_NE(f.error().message.find(c.mention), std::string::npos) << f.error().message;
  }
  EXPECT_FALSE(loadServeFile("/nonexistent/serve.yaml"));
}

}  // namespace
}  // namespace tessera::config
