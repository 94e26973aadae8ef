//! The object storage harness: a bucket on a moto server behind the fault
//! proxy, the settings and environment a replica needs to read it, and an
//! object_store client (the crate the server uses, straight to moto) to put
//! and delete objects as an operator's `aws s3 cp` would.

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use portfolio_replica::ServeConfig;
use portfolio_replica::storage::{Location, StorageOptions};
use serde_json::Value;

use super::{FaultProxy, Moto};

pub const BUCKET: &str = "fleet";

/// A moto server with one bucket, reached by replicas through a proxy.
pub struct S3 {
    pub moto: Moto,
    pub proxy: FaultProxy,
    /// Straight to moto, for the test's own writes.
    store: Arc<dyn ObjectStore>,
}

impl S3 {
    /// A fresh moto with the bucket, and a proxy in front of it.
    pub async fn start() -> S3 {
        S3::start_with(false).await
    }

    /// The same; `serialize` makes the proxy pass requests one at a time.
    pub async fn start_with(serialize: bool) -> S3 {
        let moto = Moto::start().await;
        moto.create_bucket(BUCKET).await;
        let proxy = FaultProxy::start(moto.addr, serialize).await;
        let store = client(&format!("http://{}", moto.addr));
        S3 { moto, proxy, store }
    }

    /// Replaces moto by a fresh, empty one (with the bucket), behind the
    /// same proxy: storage came back after an outage, without its data.
    pub async fn restart_moto(&mut self) {
        self.moto.stop();
        self.moto = Moto::start().await;
        self.moto.create_bucket(BUCKET).await;
        self.proxy.set_upstream(self.moto.addr);
        self.store = client(&format!("http://{}", self.moto.addr));
    }

    /// `s3://fleet/<prefix>/`.
    pub fn url(&self, prefix: &str) -> String {
        format!("s3://{BUCKET}/{prefix}/")
    }

    /// The endpoint replicas use: the proxy.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.proxy.addr)
    }

    /// The variables a replica (or the publisher) reads the bucket with.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ACCESS_KEY_ID", "test".to_owned()),
            (
                "AWS_SECRET_ACCESS_KEY",
                "test-secret-never-logged".to_owned(),
            ),
            ("AWS_REGION", "us-east-1".to_owned()),
            ("AWS_ALLOW_HTTP", "true".to_owned()),
        ]
    }

    /// The same, straight to moto: a publisher that does not go through the
    /// proxy's faults.
    pub fn direct_env(&self) -> Vec<(&'static str, String)> {
        let mut env = self.env();
        env[0].1 = format!("http://{}", self.moto.addr);
        env
    }

    /// The same settings for an in-process server.
    pub fn options(&self) -> StorageOptions {
        StorageOptions {
            endpoint: Some(self.endpoint()),
            region: Some("us-east-1".to_owned()),
            allow_http: Some(true),
            access_key_id: Some("test".to_owned()),
            secret_access_key: Some("test-secret-never-logged".to_owned()),
            timeout: Duration::from_secs(2),
            cache_dir: None,
            ..StorageOptions::default()
        }
    }

    /// Configures an in-process server to poll `prefix` every `poll`.
    pub fn configure(&self, config: &mut ServeConfig, prefix: &str, poll: Duration) {
        config.snapshots = Location::parse(&self.url(prefix)).expect("an object store URL");
        config.storage = self.options();
        config.poll_interval = Some(poll);
    }

    pub async fn put(&self, key: &str, bytes: Vec<u8>) {
        self.store
            .put(&ObjectPath::from(key), PutPayload::from(bytes))
            .await
            .unwrap_or_else(|e| panic!("put {key}: {e}"));
    }

    pub async fn put_json(&self, key: &str, value: &Value) {
        self.put(key, serde_json::to_vec(value).expect("serialize"))
            .await;
    }

    pub async fn delete(&self, key: &str) {
        self.store
            .delete(&ObjectPath::from(key))
            .await
            .unwrap_or_else(|e| panic!("delete {key}: {e}"));
    }

    pub async fn get(&self, key: &str) -> Option<Vec<u8>> {
        match self.store.get(&ObjectPath::from(key)).await {
            Ok(result) => Some(result.bytes().await.expect("read the object").to_vec()),
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => panic!("get {key}: {e}"),
        }
    }

    pub async fn keys(&self, prefix: &str) -> Vec<String> {
        use futures_util::TryStreamExt;
        let mut keys: Vec<String> = self
            .store
            .list(Some(&ObjectPath::from(prefix)))
            .map_ok(|meta| meta.location.to_string())
            .try_collect()
            .await
            .expect("list");
        keys.sort();
        keys
    }

    /// What `portfolio-replica versions --to URL --json` says of `prefix`:
    /// `{"manifest": {...revision...}, "workspaces": {id: {current,
    /// versions}}}`, or `None` if nothing was published there.
    pub async fn versions(&self, prefix: &str) -> Option<Value> {
        let url = self.url(prefix);
        let out = super::cli_env(&["versions", "--to", &url, "--json"], &self.env()).await;
        if out.code != Some(0) {
            assert!(out.stderr.contains("does not exist"), "{out:?}");
            return None;
        }
        Some(serde_json::from_str(&out.stdout).expect("versions --json"))
    }
}

fn client(endpoint: &str) -> Arc<dyn ObjectStore> {
    Arc::new(
        AmazonS3Builder::new()
            .with_bucket_name(BUCKET)
            .with_endpoint(endpoint)
            .with_allow_http(true)
            .with_region("us-east-1")
            .with_access_key_id("test")
            .with_secret_access_key("test")
            .build()
            .expect("an S3 client for moto"),
    )
}
