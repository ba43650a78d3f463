//! The `blobs` table (migration 0018): bytes named by their blake3 digest.
//!
//! A queued task travels in them (`queue::carry`). The store names blobs
//! by the digest its caller gives and checks nothing of their content: the
//! lane that reads them back checks each against its name, so a wrong
//! blob is found where it would be used, whoever wrote it.

use std::collections::BTreeMap;

use sqlx::Row;

use super::{Store, StoreError};

impl Store {
    /// Stores each `(digest, bytes)` not stored yet, in one transaction; a
    /// digest already there is left as it is (content-addressed: the same
    /// name holds the same bytes).
    pub async fn put_blobs(&self, blobs: &[(&str, &[u8])]) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(self.sql())?;
        for (digest, bytes) in blobs {
            sqlx::query(
                "INSERT INTO blobs (digest, size, content) VALUES ($1, $2, $3)
                 ON CONFLICT (digest) DO NOTHING",
            )
            .bind(*digest)
            .bind(bytes.len() as i64)
            .bind(*bytes)
            .execute(&mut *tx)
            .await
            .map_err(self.sql())?;
        }
        tx.commit().await.map_err(self.sql())
    }

    /// The blobs named, by digest; a digest not stored is absent from the
    /// map.
    pub async fn blobs(&self, digests: &[&str]) -> Result<BTreeMap<String, Vec<u8>>, StoreError> {
        let mut found = BTreeMap::new();
        for digest in digests {
            if found.contains_key(*digest) {
                continue;
            }
            let row = sqlx::query("SELECT content FROM blobs WHERE digest = $1")
                .bind(*digest)
                .fetch_optional(&self.pool)
                .await
                .map_err(self.sql())?;
            if let Some(row) = row {
                found.insert((*digest).to_owned(), row.get::<Vec<u8>, _>(0));
            }
        }
        Ok(found)
    }

    /// How many blobs are stored, and their bytes together.
    pub async fn blob_totals(&self) -> Result<(i64, i64), StoreError> {
        let row = sqlx::query("SELECT COUNT(*), CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM blobs")
            .fetch_one(&self.pool)
            .await
            .map_err(self.sql())?;
        Ok((row.get(0), row.get(1)))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{on_both_backends, pg_store, sqlite_store};
    use super::*;

    on_both_backends!(a_blob_is_stored_once_and_reads_back_byte_for_byte);

    async fn a_blob_is_stored_once_and_reads_back_byte_for_byte(store: Store) {
        // Not UTF-8, with a NUL: bytes, not text.
        let odd: &[u8] = &[0xff, 0x00, 0xfe, b'\n'];
        let text: &[u8] = b"[pools]\n";
        store
            .put_blobs(&[("d-odd", odd), ("d-text", text)])
            .await
            .unwrap();
        // Again, and once more within one call: still one row each.
        store
            .put_blobs(&[("d-odd", odd), ("d-odd", odd)])
            .await
            .unwrap();
        assert_eq!(store.blob_totals().await.unwrap(), (2, 12));
        let got = store.blobs(&["d-odd", "d-text", "d-none"]).await.unwrap();
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got["d-odd"], odd);
        assert_eq!(got["d-text"], text);
    }
}
