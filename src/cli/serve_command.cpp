// `kite serve`: the OpenAI-compatible HTTP server (src/server/) over one in-process Engine.
// Loads the model, binds (loopback by default; --port 0 picks a free port), prints
// "kite: listening on http://HOST:PORT" on stderr, and serves until SIGTERM/SIGINT have
// drained the requests in flight. The Engine is destroyed before the server's io_context, so
// its last callbacks post into a stopped (not a destroyed) context.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/number_checks.h"
#include "core/logging.h"
#include "engine/engine.h"
#include "server/http_server.h"
#include "server/routes.h"
#include "tokenizer/prompt_renderer.h"

namespace kite::cli {
namespace {

// 1,000 concurrent clients need more descriptors than the common soft limit of 1024.
void raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace

void add_serve_command(CLI::App& app, CommandRunner* run) {
  struct Flags {
    EngineConfig engine;
    server::HttpServerConfig http;
    server::RouterConfig router;  // served_model_name, api_key, limits
  };
  auto f = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API");
  add_engine_flags(cmd, &f->engine);
  cmd->add_option("--host", f->http.host,
                  "Address to bind (default 127.0.0.1; 0.0.0.0 for every interface)");
  cmd->add_option("--port", f->http.port, "TCP port (default 8000; 0 picks a free one)");
  cmd->add_option("--api-key", f->router.api_key,
                  "Require 'Authorization: Bearer KEY' on /v1/*, /tokenize, /detokenize (default: "
                  "$KITE_API_KEY)");
  cmd->add_option("--served-model-name", f->router.served_model_name,
                  "Model name clients use (default: the model folder's name)");
  cmd->add_option("--max-request-body-bytes", f->http.max_request_body_bytes,
                  "Larger request bodies get HTTP 413 (default 8 MiB)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 32));
  cmd->add_option("--max-header-bytes", f->http.max_header_bytes,
                  "Larger request lines + headers get HTTP 431 (default 65536)")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 24));
  cmd->add_option("--idle-timeout", f->http.idle_timeout_s,
                  "Seconds a connection may take to send a complete request, or stay idle "
                  "between requests, before it is closed (default 60)")
      ->check(kPositive);
  auto& limits = f->router.limits;
  cmd->add_option("--max-messages", limits.max_messages,
                  "Chat requests with more messages get HTTP 400 (default 1024)")
      ->check(kPositive);
  cmd->add_option("--max-stop-strings", limits.max_stop_strings,
                  "Requests with more 'stop' strings get HTTP 400 (default 16)")
      ->check(kPositive);
  cmd->add_option("--max-prompt-bytes", f->router.max_prompt_bytes,
                  "Longer prompts get HTTP 400 before tokenization (default: what max_model_len "
                  "tokens can hold)");
  cmd->add_option("--io-threads", f->http.num_threads,
                  "Threads running the HTTP event loop (default 2)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--drain-timeout", f->http.drain_timeout_s,
                  "Seconds to wait for in-flight requests after SIGTERM (default 600)")
      ->check(kNonNegative);
  cmd->callback([run, f] {
    *run = [f]() -> Status {
      resolve_model_dir(&f->engine);
      std::string& api_key = f->router.api_key;
      std::string& served_model_name = f->router.served_model_name;
      if (api_key.empty())
        if (const char* k = std::getenv("KITE_API_KEY")) api_key = k;
      if (served_model_name.empty())
        served_model_name =
            std::filesystem::path(f->engine.model_dir).lexically_normal().filename().string();
      if (served_model_name.empty())
        served_model_name =
            std::filesystem::path(f->engine.model_dir).parent_path().filename().string();
      raise_fd_limit();

      spdlog::info("loading model {} ...", f->engine.model_dir);
      const auto t0 = std::chrono::steady_clock::now();
      KITE_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::create(f->engine));
      KITE_ASSIGN_OR_RETURN(PromptRenderer renderer,
                            PromptRenderer::create(engine->tokenizer(), f->engine.model_dir));
      spdlog::info("model '{}' loaded in {:.2f} s (max_model_len {}, {} KV blocks)",
                   served_model_name,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                   engine->max_model_len(), engine->num_kv_blocks());

      server::Router router(f->router, engine.get(), &renderer);
      KITE_ASSIGN_OR_RETURN(std::unique_ptr<server::HttpServer> http,
                            server::HttpServer::create(f->http, &router));
      std::fprintf(stderr, "kite: listening on http://%s:%u%s\n", f->http.host.c_str(),
                   http->port(), api_key.empty() ? "" : " (API key required)");
      std::fflush(stderr);
      Status st = http->run();
      // Every request has finished (or the drain timed out): the block pool and the request
      // accounting must still agree, or a leak has happened; say so with a non-zero exit.
      if (Status integrity = engine->check_integrity(); !integrity.ok()) {
        spdlog::error("engine integrity check failed at exit: {}", integrity.message());
        if (st.ok()) st = integrity.with_context("engine integrity check at exit");
      } else {
        const auto stats = engine->stats();
        spdlog::info(
            "engine integrity check passed at exit: {} running, {} waiting, KV cache "
            "usage {:.4f} of {} blocks",
            stats.num_running, stats.num_waiting, stats.kv_cache_usage, engine->num_kv_blocks());
      }
      engine.reset();  // joins the engine thread while the io_context still exists
      http.reset();
      spdlog::info("server stopped");
      return st;
    };
  });
}

}  // namespace kite::cli
